"""Cost reports from a real Triton node with real traffic, scraped by the real collector.

The collector's ticks are given explicit times, so the rollups of a few seconds of real
traffic land in known minutes; the node is then killed, and its scrapes fail as they would.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from reports import selectors
from tests.reports.conftest import PRICE, write_scraped

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


@pytest.fixture
def lab(scraped):
    return write_scraped(scraped)


def _minutes(n: int) -> Decimal:
    return PRICE / 60 * n


@pytest.mark.parametrize("span", [(0, 6), (0, 3), (2, 6), (1, 2), (-30, 7)])
@pytest.mark.parametrize("group_by", list(selectors.GROUP_KEYS))
def test_allocations_idle_and_unknown_add_up_to_the_node_cost(lab, span, group_by):
    start, _ = lab
    since, until = (start + timedelta(minutes=m) for m in span)
    report = selectors.cost_report(since=since, until=until, group_by=group_by)
    billed = (until - max(since, start)) // timedelta(minutes=1)
    assert report["total_cost"] == _minutes(billed).quantize(Decimal("0.01"))
    parts = sum(r["cost"] for r in report["rows"])
    if group_by in ("cluster", "node"):
        parts += sum(r["idle_cost"] + r["unknown_cost"] for r in report["rows"])
    else:
        parts += report["idle_cost"] + report["unknown_cost"]
    assert parts == report["total_cost"]


def test_the_dead_node_minutes_are_unknown_and_not_charged_to_models(lab):
    start, names = lab
    after = selectors.cost_report(
        since=start + timedelta(minutes=4), until=start + timedelta(minutes=6), group_by="model"
    )
    assert after["unknown_cost"] == _minutes(2) == after["total_cost"]
    assert after["rows"] == []
    before = selectors.cost_report(since=start, until=start + timedelta(minutes=4), group_by="node")
    assert before["unknown_cost"] == 0 and before["rows"][0]["cost"] > 0


def test_models_are_charged_in_proportion_to_their_compute_time(lab):
    start, names = lab
    report = selectors.cost_report(
        since=start, until=start + timedelta(minutes=6), group_by="model"
    )
    rows = {r["model"]: r for r in report["rows"]}
    busy, half = rows[names["busy"]], rows[names["half"]]
    assert busy["successes"] > half["successes"] > 0
    assert busy["compute_hours"] > half["compute_hours"] > 0
    lines = selectors.range_lines(start, start + timedelta(minutes=6))
    ticks = {model: line.cost_ticks for (_c, _n, _k, model, _v, _ck), line in lines.items()}
    compute = {model: line.compute_us for (_c, _n, _k, model, _v, _ck), line in lines.items()}
    # The report rounds compute hours to 6 decimals (a few milliseconds of a small CPU
    # model is 0.000004 h), so the charges are compared with the compute they came from.
    compute_ratio = compute[names["busy"]] / compute[names["half"]]
    assert ticks[names["busy"]] / ticks[names["half"]] == pytest.approx(compute_ratio, rel=0.02)
    assert busy["compute_hours"] == pytest.approx(compute[names["busy"]] / 3.6e9, abs=1e-6)
    assert rows[names["ghost"]]["cost"] == 0 and rows[names["ghost"]]["requests"] == 0
    assert busy["cost_per_1k"] is not None


def test_a_loaded_version_without_traffic_is_a_ghost_with_its_cost(lab, make_user):
    start, names = lab
    client = APIClient()
    client.force_authenticate(make_user("mia", role="managers"))
    answer = client.get("/api/v1/reports/ghosts/", {"days": "0.01"})  # 14.4 minutes
    assert answer.status_code == 200
    ghosts = {(r["model"], r["version"]): r for r in answer.json()["rows"]}
    assert set(ghosts) == {(names["ghost"], "1")}
    ghost = ghosts[(names["ghost"], "1")]
    assert ghost["cluster"] == "cost-lab" and ghost["days_loaded"] == round(4 / 1440, 4)
    assert 0 < ghost["cost"] < float(_minutes(4))
    assert 0 < ghost["cost_share"] < 1
    assert ghost["projected_monthly_cost"] > ghost["cost"]
