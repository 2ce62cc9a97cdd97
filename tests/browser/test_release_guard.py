"""A release the fast guard rolls back before its first analysis interval: the cockpit draws
the guard's per-tick samples (the evidence it acted on) instead of empty interval charts,
and the list and the cockpit show weight 0 with the peak it reached. Real Triton nodes,
a real nginx router, real traffic; Chromium against daphne."""

import pytest

from releases.models import Release
from releases.services import release_create
from tests.browser.helpers import login
from tests.releases.test_release_flow import (
    Traffic,
    _model_with_baseline,
    _unload,
    release_world,  # noqa: F401 - fixture
)
from tests.ticking import Ticking

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.django_db(transaction=True)]


def _ticked_until_finished(release, lanes, timeout_s: float = 120.0) -> Release:
    """The release once it ended, ticked by the session's lane workers (queued as beat
    does; nothing ticks in this thread, where Playwright's loop runs)."""
    with Ticking(lanes) as loop:
        return loop.until(release.pk, lambda r: not r.is_active, "the release to end", timeout_s)


def test_fast_guard_rollback_shows_the_samples_that_triggered_it(
    daphne_server,
    page,
    release_world,  # noqa: F811
    lanes,
    settings,
):
    world, base = release_world, f"http://{daphne_server}"
    settings.SWITCHYARD_STORAGE_ROOT = lanes.storage  # where the lanes' workers read
    model, _, candidate = _model_with_baseline(
        world, "rel_guard", 3, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    with Traffic(world["port"], "rel_guard"):
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[40, 100],
            step_interval_s=600,  # no interval ends: only the fast guard can act
            analysis={"min_requests": 10, "fast_guard_min_requests": 10},
            drain_s=0.5,
            progress_deadline_s=900,
        )
        release = _ticked_until_finished(release, lanes)
    try:
        assert release.phase == "ROLLED_BACK", release.reason
        assert release.events.filter(kind="phase", message__contains="fast guard").exists()
        assert not release.events.filter(kind="analysis").exists()
        assert release.guard_samples and release.guard_samples[-1]["tripped"]

        login(page, base, "rita")
        page.goto(f"{base}/releases/{release.pk}/")
        page.wait_for_selector("[data-testid=guard-chart][data-samples]", timeout=10000)
        assert int(page.get_attribute("[data-testid=guard-chart]", "data-samples")) >= 1
        last = page.inner_text("[data-testid=guard-last]")
        assert "Tripped" in last and "errors" in last and "limit" in last
        assert "before its first analysis interval" in page.inner_text("[data-testid=no-interval]")
        assert page.locator("#chart-p99").count() == 0  # no empty interval charts
        assert page.inner_text("[data-testid=weight]").startswith("0%")
        assert "40%" in page.inner_text("[data-testid=peak-weight]")
        page.goto(f"{base}/releases/")
        row = page.inner_text("[data-testid=release-weight]")
        assert row.startswith("0%") and "peak 40%" in row
    finally:
        _unload(world, model)
