"""The release cockpit in Chromium, served by daphne (HTTP and websockets): a release
manager approves a manual gate with a reason while the session's lane workers tick it (queued
as beat does, tests/ticking.py) against real Triton nodes and a real nginx; the page follows
the release over /ws/releases/<id>/."""

import pytest

from releases.services import release_create
from tests.releases.test_release_flow import (
    Traffic,
    _model_with_baseline,
    _unload,
    release_world,  # noqa: F401 - fixture
)
from tests.ticking import Ticking

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.django_db(transaction=True)]


def test_release_manager_approves_a_gate_on_the_cockpit(
    daphne_server,
    page,
    release_world,  # noqa: F811
    lanes,
    settings,
):
    world, base = release_world, f"http://{daphne_server}"
    settings.SWITCHYARD_STORAGE_ROOT = lanes.storage  # where the lanes' workers read
    model, _, candidate = _model_with_baseline(
        world, "rel_cockpit", 2, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    with Traffic(world["port"], "rel_cockpit"):
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[50, 100],
            manual_gates=[100],
            step_interval_s=2,
            drain_s=0.5,
            progress_deadline_s=60,
            analysis={"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5},
        )
        ticker = Ticking(lanes)
        try:
            page.goto(f"{base}/login/")
            page.fill("#id_username", "rita")
            page.fill("#id_password", "pw-rita")
            page.click("button[type=submit]")
            page.goto(f"{base}/releases/{release.pk}/")
            # Ticks start once the page listens, so every phase after PENDING reaches it over
            # the websocket (on a busy machine the page could otherwise open at the gate).
            page.wait_for_selector("[data-testid=ws-badge]:has-text('live')", timeout=30000)
            ticker.start()
            page.wait_for_selector(
                "[data-testid=phase]:has-text('WAITING_APPROVAL')", timeout=60000
            )
            assert "50% to v2" in page.inner_text("[data-testid=weight]")
            # The page got there because the websocket said so (no timer polls while live).
            assert page.inner_text("[data-testid=ws-badge]") == "live"
            assert int(page.get_attribute("#cockpit-live", "data-updates")) > 0
            assert "pass" in page.inner_text("[data-testid=gates]")
            page.once("dialog", lambda dialog: dialog.accept("metrics look good"))
            page.click("button[data-action=approve]")
            page.wait_for_selector("[data-testid=phase]:has-text('SUCCEEDED')", timeout=60000)
            timeline = page.inner_text("[data-testid=timeline]")
            assert "rita asked to approve: metrics look good" in timeline
            page.wait_for_selector("[data-testid=ws-badge]:has-text('finished')", timeout=10000)
        finally:
            ticker.stop()
    _unload(world, model)
