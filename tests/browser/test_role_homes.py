"""Each role's home against a running cluster (real Triton nodes, a real nginx router, real
traffic scraped by the real collector, a release ticking): what it answers at a glance,
screenshots at 1440 px under var/test-artifacts/, every main page passing axe-core with no
serious or critical violation, and the home and cockpit usable 390 px wide."""

import asyncio
import json
import time
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings

from deployments.models import PriceChange, TritonCluster
from deployments.reconcile import cluster_reconcile
from deployments.services import deployment_create
from models_registry.services import model_create
from releases.services import release_create
from telemetry.collector import Collector, ScrapeSource, Target
from telemetry.services import rollups_write
from tests.browser.helpers import login, screenshot
from tests.conftest import in_thread
from tests.deploying import pushed
from tests.registry.archives import register_risk_score_as
from tests.releases.test_release_flow import (
    Traffic,
    _model_with_baseline,
    release_world,  # noqa: F401 - fixture
)
from tests.telemetry.live import unload
from tests.ticking import Ticking

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.django_db(transaction=True)]

AXE = Path(settings.BASE_DIR) / "node_modules" / "axe-core" / "axe.min.js"
WIDE, NARROW = {"width": 1440, "height": 1000}, {"width": 390, "height": 844}


def axe_violations(page) -> list[str]:
    """Serious and critical axe-core violations of the page as loaded, in words."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def _world_with_traffic(world):
    model, _, candidate = _model_with_baseline(
        world, "home_risk", 2, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    ghost = model_create(name="home_ghost", team="fraud", actor=world["ada"])
    ghost_v1 = register_risk_score_as(ghost, world["ada"], 1)
    run = deployment_create(cluster=world["cluster"], version=ghost_v1, actor=world["rita"])
    pushed(run)
    # Priced so from its creation on (the past minutes scraped below are charged this).
    TritonCluster.objects.filter(pk=world["cluster"].pk).update(node_hourly_cost=Decimal("3600"))
    PriceChange.objects.filter(cluster=world["cluster"], node_name="").update(
        node_hourly_cost=Decimal("3600")
    )
    cluster_reconcile(cluster=world["cluster"])
    return model, candidate


def _scrape_into_past_minutes(world) -> None:
    """The real collector scrapes the live nodes under real traffic for a few seconds, its
    ticks dated two minutes back: cost reports count finished minutes only."""
    nodes = list(world["cluster"].nodes.all())
    source = ScrapeSource([Target("canary", n.name, n.metrics_url) for n in nodes])
    rows = []

    async def keep(finished) -> None:
        rows.extend(finished)

    collector = Collector([source], store=keep)
    t0 = (time.time() // 60) * 60 - 120
    for second in (1, 15, 30, 45, 59):
        in_thread(asyncio.run, collector.tick(t0 + second))
        time.sleep(1.0)
    in_thread(asyncio.run, collector.flush(None))
    assert rollups_write(rows=rows) == len(rows) > 0


def _start_release(world, candidate, lanes):
    """A release the session's lane workers tick (queued as beat does), once PROGRESSING."""
    release = release_create(
        cluster=world["cluster"],
        candidate=candidate,
        actor=world["rita"],
        steps=[20, 100],
        step_interval_s=300,
        progress_deadline_s=900,
        drain_s=0.5,
    )
    ticker = Ticking(lanes)
    ticker.start()
    try:
        release = ticker.phase(release.pk, {"PROGRESSING"}, timeout_s=120)
    except BaseException:
        ticker.stop()
        raise
    return release, ticker


def test_each_role_home_answers_its_question_and_every_page_passes_axe(
    daphne_server,
    page,
    make_user,
    release_world,  # noqa: F811
    lanes,
    settings,
):
    world, base = release_world, f"http://{daphne_server}"
    settings.SWITCHYARD_STORAGE_ROOT = lanes.storage  # where the lanes' workers read
    make_user("max", role="managers")
    model, candidate = _world_with_traffic(world)
    ticker = None
    try:
        with Traffic(world["port"], "home_risk"):
            _scrape_into_past_minutes(world)
            release, ticker = _start_release(world, candidate, lanes)
            page.set_viewport_size(WIDE)
            _release_managers_home(page, base, release)
            _algorithm_home(page, base)
            _managers_home(page, base)
            _every_main_page_passes_axe(page, base, release)
            _usable_at_390_px(page, base, release)
    finally:
        if ticker is not None:
            ticker.stop()
        unload(world["nodes"], "home_risk")
        unload(world["nodes"], "home_ghost")


def _release_managers_home(page, base, release):
    login(page, base, "rita")
    home = page.locator("[data-testid=home-releases]")
    card = home.locator("[data-testid=home-cluster]", has_text="canary")
    assert card.locator("[data-testid=nodes-up]").inner_text() == "2/2"
    assert "home_risk v1, v2" in card.locator("[data-testid=serving]").inner_text()
    assert "home_ghost v1" in card.locator("[data-testid=serving]").inner_text()
    assert "drift" in card.locator("[data-testid=drift]").inner_text()
    running = home.locator("[data-testid=running-releases]").inner_text()
    assert "home_risk v1 → v2" in running and "PROGRESSING" in running and "20%" in running
    page.wait_for_selector("[data-next-check]:has-text('next check in')", timeout=5000)
    assert home.locator("[data-testid=alerts], [data-testid=alerts-none]").count() == 1
    screenshot(page, "home-release-managers-1440")
    page.click("[data-tab=costs]")  # everyone reaches the others' views
    assert page.locator("[data-testid=month-cost]").is_visible()
    page.click("text=Sign out")


def _algorithm_home(page, base):
    login(page, base, "ada")
    row = page.locator("[data-testid=home-models] tr[data-model=home_risk]")
    text = row.inner_text()
    assert "v2" in text and "valid" in text
    assert row.locator("[data-testid=benchmark]").inner_text() == "none"
    assert "canary (production): v1, v2" in row.locator("[data-testid=where]").inner_text()
    ghost = page.locator("[data-testid=home-models] tr[data-model=home_ghost]")
    assert "canary (production): v1" in ghost.locator("[data-testid=where]").inner_text()
    screenshot(page, "home-algorithm-1440")
    page.click("text=Sign out")


def _managers_home(page, base):
    login(page, base, "max")
    cost = page.inner_text("[data-testid=month-cost]")
    assert Decimal(cost.split()[0]) > 0, cost
    assert "home_risk" in page.inner_text("[data-testid=top-models]")
    assert "home_ghost v1" in page.inner_text("[data-testid=ghosts]")
    screenshot(page, "home-managers-1440")
    page.click("text=Sign out")


def _every_main_page_passes_axe(page, base, release):
    login(page, base, "rita")
    paths = [
        "/",
        "/?tab=models",
        "/?tab=costs",
        "/models/",
        "/models/home_risk/",
        "/models/home_risk/versions/2/",
        "/models/home_risk/live/",
        "/models/home_risk/cost/",
        "/clusters/",
        "/clusters/canary/",
        "/clusters/canary/live/",
        "/releases/",
        f"/releases/{release.pk}/",
        "/reports/",
        "/audit/",
        "/account/tokens/",
    ]
    found = {}
    for path in paths:
        page.goto(f"{base}{path}")
        page.wait_for_load_state("load")
        problems = axe_violations(page)
        if problems:
            found[path] = problems
    page.click("text=Sign out")
    page.goto(f"{base}/login/")
    if problems := axe_violations(page):
        found["/login/"] = problems
    report = Path(settings.SWITCHYARD_VAR_DIR) / "test-artifacts" / "axe-violations.json"
    report.write_text(json.dumps(found, indent=1))
    assert not found, found


def _usable_at_390_px(page, base, release):
    login(page, base, "rita")
    page.set_viewport_size(NARROW)
    for path in ("/", f"/releases/{release.pk}/"):
        page.goto(f"{base}{path}")
        page.wait_for_load_state("load")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= NARROW["width"], (path, width)
        assert not axe_violations(page), path
    screenshot(page, "cockpit-390")
