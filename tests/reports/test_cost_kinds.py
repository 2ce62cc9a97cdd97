"""Cost kinds from telemetry rollups written directly: temporary models' node time on their
model and version as validation and benchmark, per-kind columns to the cent, the kind
filter, ghosts. (Real smoke tests and benchmarks on Triton: test_cost_kinds_on_triton.py.)"""

import csv
import io
from datetime import UTC, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from deployments.models import TritonCluster, TritonNode
from models_registry.models import Model, Team
from reports import selectors
from reports.models import CostRollup
from telemetry.models import Rollup

pytestmark = pytest.mark.django_db

PRICE = Decimal("60.0000")  # 1.00 a minute: a second of compute is 1/60 of it
TEMPORARY = ("--smoke-", "--bench-")


def _minute_rows(cluster, minute, series):
    rows = [Rollup(cluster=cluster, node_name="n1", minute=minute)]
    for model, version, compute_s, requests in series:
        rows.append(
            Rollup(
                cluster=cluster,
                node_name="n1",
                model_name=model,
                version=version,
                minute=minute,
                requests=requests,
                successes=requests,
                compute_us=compute_s * 1e6,
            )
        )
    return rows


def write_fleet(start):
    """Ten minutes of n1 from `start`: `a` v1 serves (18 s a minute, 100 requests); two smoke
    tests of a v1 in minute 0 and one in minute 1 (6 s each); a benchmark of a v2 in
    minutes 2-5 (12 s, 500 requests); an old-named benchmark of a v1 in minute 6 (30 s);
    `g` v1 loaded without requests; g v2's smoke test loaded without requests at the end."""
    cluster = TritonCluster.objects.create(name="prod", environment="production")
    cluster.node_hourly_cost = PRICE
    cluster.save(update_fields=["node_hourly_cost"])
    TritonNode.objects.create(cluster=cluster, name="n1", http_url="http://127.0.0.1:1")
    team = Team.objects.create(name="fraud")
    for name in ("a", "g"):
        Model.objects.create(name=name, team=team)
    rows = []
    for i in range(10):
        series = [("a", "1", 18, 100), ("g", "1", 0, 0)]
        if i == 0:
            series += [("a--smoke-1-c1516e", "1", 6, 1), ("a--smoke-1-0a9f3b", "1", 6, 1)]
        if i == 1:
            series += [("a--smoke-1-77aa00", "1", 6, 1)]
        if 2 <= i <= 5:
            series += [("a--bench-9-v2-5e5e5e", "2", 12, 500)]
        if i == 6:
            series += [("a--bench-8-c0ffee", "1", 30, 50)]
        if i == 9:
            series += [("g--smoke-2-abcdef", "2", 0, 0)]
        rows += _minute_rows(cluster, start + timedelta(minutes=i), series)
    Rollup.objects.bulk_create(rows)
    return start


@pytest.fixture
def recent():
    """The fleet's ten minutes end a minute ago (its versions are still loaded)."""
    now = timezone.now().replace(second=0, microsecond=0)
    return write_fleet(now - timedelta(minutes=11))


@pytest.fixture
def past():
    day = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return write_fleet(day - timedelta(days=2) + timedelta(hours=10))


def _rows(report, *keys):
    return {tuple(r[k] for k in keys): r for r in report["rows"]}


def _cents(value: str) -> Decimal:
    return Decimal(value)


def test_temporary_models_are_charged_to_their_version_under_their_kind(recent):
    report = selectors.cost_report(
        since=recent, until=recent + timedelta(minutes=10), group_by="version"
    )
    rows = _rows(report, "model", "version")
    assert set(rows) == {("a", "1"), ("a", "2"), ("g", "1"), ("g", "2")}
    a1, a2 = rows[("a", "1")], rows[("a", "2")]
    # 18 s of 60 is 0.30 a minute; each smoke test 0.10; the old benchmark 0.50.
    assert (a1["serving_cost"], a1["validation_cost"], a1["benchmark_cost"]) == (
        _cents("3.00"),
        _cents("0.30"),
        _cents("0.50"),
    )
    assert a1["cost"] == _cents("3.80")
    assert (a2["serving_cost"], a2["validation_cost"], a2["benchmark_cost"]) == (
        0,
        0,
        _cents("0.80"),
    )
    # Requests and cost per 1k are the clients' (serving) only.
    assert a1["requests"] == 1000 and a1["cost_per_1k"] == _cents("3.0000")
    assert a2["requests"] == 0 and a2["cost_per_1k"] is None
    assert report["total_cost"] == _cents("10.00") and report["idle_cost"] == _cents("5.40")


@pytest.mark.parametrize("group_by", list(selectors.GROUP_KEYS))
@pytest.mark.parametrize("span", [(0, 10), (0, 1), (1, 7), (3, 4)])
def test_kinds_add_up_to_each_row_and_rows_idle_unknown_to_the_nodes(recent, group_by, span):
    since, until = (recent + timedelta(minutes=m) for m in span)
    report = selectors.cost_report(since=since, until=until, group_by=group_by)
    assert report["total_cost"] == PRICE / 60 * (span[1] - span[0])
    parts = report["idle_cost"] + report["unknown_cost"]
    for row in report["rows"]:
        assert row["cost"] == row["serving_cost"] + row["validation_cost"] + row["benchmark_cost"]
        assert not any(t in str(v) for t in TEMPORARY for v in row.values())
        parts += row["cost"]
    if group_by in selectors.NODE_GROUPS:
        parts = sum(r["cost"] + r["idle_cost"] + r["unknown_cost"] for r in report["rows"])
    assert parts == report["total_cost"]


def test_stored_rollups_keep_the_kinds_and_answer_what_the_minutes_answer(past):
    since, until = past - timedelta(days=1, hours=10), past + timedelta(days=1, minutes=5)
    live = {g: selectors.cost_report(since=since, until=until, group_by=g) for g in ("version",)}
    call_command("cost_rollup", "--since", (since - timedelta(hours=1)).isoformat())
    stored = CostRollup.objects.filter(period="hour", kind="model")
    assert set(stored.values_list("model_name", "version", "cost_kind")) == {
        ("a", "1", "serving"),
        ("a", "1", "validation"),
        ("a", "1", "benchmark"),
        ("a", "2", "benchmark"),
        ("g", "1", "serving"),
        ("g", "2", "validation"),
    }
    assert set(CostRollup.objects.exclude(kind="model").values_list("cost_kind", flat=True)) == {""}
    for group_by, report in live.items():
        assert selectors.cost_report(since=since, until=until, group_by=group_by) == report


@pytest.fixture
def manager(make_user):
    client = APIClient()
    client.force_authenticate(make_user("mia", role="managers"))
    return client


def test_the_kind_filter_keeps_only_that_kinds_cost(recent, manager):
    span = {"from": recent.isoformat(), "to": (recent + timedelta(minutes=10)).isoformat()}
    answer = manager.get(
        "/api/v1/reports/cost/", {**span, "group_by": "version", "kind": "benchmark"}
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    got = {
        (r["model"], r["version"]): (r["cost"], r["benchmark_cost"], r["requests"])
        for r in body["rows"]
    }
    assert got == {("a", "1"): (0.5, 0.5, 50), ("a", "2"): (0.8, 0.8, 2000)}
    assert body["total_cost"] == 1.3 and body["idle_cost"] == body["unknown_cost"] == 0
    validation = manager.get(
        "/api/v1/reports/cost/", {**span, "group_by": "team", "kind": "validation"}
    )
    assert [(r["team"], r["cost"], r["serving_cost"]) for r in validation.json()["rows"]] == [
        ("fraud", 0.3, 0.0)
    ]


def test_csv_has_the_kind_columns(recent, manager):
    span = {"from": recent.isoformat(), "to": (recent + timedelta(minutes=10)).isoformat()}
    answer = manager.get("/api/v1/reports/cost/", {**span, "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(answer.content.decode())))
    assert {"serving_cost", "validation_cost", "benchmark_cost"} <= set(rows[0])
    a = next(r for r in rows if r["model"] == "a")
    assert (a["cost"], a["serving_cost"], a["validation_cost"], a["benchmark_cost"]) == (
        "4.60",
        "3.00",
        "0.30",
        "1.30",
    )


def test_only_serving_versions_are_ghosts(recent, manager):
    answer = manager.get("/api/v1/reports/ghosts/", {"days": "0.01"})
    assert answer.status_code == 200
    rows = answer.json()["rows"]
    assert [(r["model"], r["version"]) for r in rows] == [("g", "1")]
    overview = selectors.month_overview()
    assert [(r["model"], r["version"]) for r in overview["ghosts"]] == [("g", "1")]
    assert {r["model"] for r in overview["top_models"]} <= {"a", "g"}  # (a month may begin)
    assert not any(t in repr(overview) for t in TEMPORARY)


def test_a_release_cost_per_1k_counts_serving_only(recent):
    cluster = TritonCluster.objects.get(name="prod")
    costs = selectors.version_costs(
        cluster_id=cluster.pk, model="a", since=recent, until=recent + timedelta(minutes=10)
    )
    assert costs["1"]["cost"] == _cents("3.00") and costs["1"]["successes"] == 1000
    assert "2" not in costs  # only benchmarked
