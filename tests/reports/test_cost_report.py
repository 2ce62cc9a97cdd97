"""Cost reports from telemetry rollups: exact sums, unknown time, stored = live, roles,
CSV = JSON, parameter checks. Rows written directly (the real-Triton test is elsewhere)."""

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

PRICE = Decimal("6.0000")  # 0.10 a minute


@pytest.fixture
def fleet():
    """n1 busy for 10 minutes (a: 20 s, b: 10 s of compute each minute); n2 up 5 minutes
    with nothing loaded, then gone."""
    day = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = day - timedelta(days=2) + timedelta(hours=10)
    cluster = TritonCluster.objects.create(
        name="prod", environment="production", node_hourly_cost=PRICE
    )
    for port, name in enumerate(("n1", "n2"), start=1):
        TritonNode.objects.create(cluster=cluster, name=name, http_url=f"http://127.0.0.1:{port}")
    team = Team.objects.create(name="fraud")
    for name in ("a", "b"):
        Model.objects.create(name=name, team=team)
    rows = []
    for i in range(10):
        minute = start + timedelta(minutes=i)
        rows.append(Rollup(cluster=cluster, node_name="n1", minute=minute))
        for model, compute in (("a", 20e6), ("b", 10e6)):
            rows.append(
                Rollup(
                    cluster=cluster,
                    node_name="n1",
                    model_name=model,
                    version="1",
                    minute=minute,
                    requests=100,
                    successes=99,
                    compute_us=compute,
                )
            )
        if i < 5:
            rows.append(Rollup(cluster=cluster, node_name="n2", minute=minute))
    Rollup.objects.bulk_create(rows)
    return start


def _report(since, until, group_by):
    return selectors.cost_report(since=since, until=until, group_by=group_by)


def test_node_cost_is_allocated_plus_idle_plus_unknown_to_the_cent(fleet):
    report = _report(fleet, fleet + timedelta(minutes=10), "node")
    rows = {r["node"]: r for r in report["rows"]}
    assert rows["n1"]["cost"] == Decimal("0.50") and rows["n1"]["idle_cost"] == Decimal("0.50")
    assert rows["n1"]["unknown_cost"] == 0
    assert rows["n2"]["cost"] == 0 and rows["n2"]["idle_cost"] == Decimal("0.50")
    assert rows["n2"]["unknown_cost"] == Decimal("0.50")  # down: paid, charged to nobody
    assert report["total_cost"] == Decimal("2.00")
    assert report["idle_cost"] == Decimal("1.00") and report["unknown_cost"] == Decimal("0.50")


@pytest.mark.parametrize("group_by", list(selectors.GROUP_KEYS))
@pytest.mark.parametrize("minutes", [(0, 10), (3, 7), (1, 61), (-600, 1000)])
def test_rows_idle_and_unknown_add_up_to_what_the_nodes_cost(fleet, group_by, minutes):
    since, until = (fleet + timedelta(minutes=m) for m in minutes)
    report = _report(since, until, group_by)
    node_minutes = 2 * ((until - max(since, fleet)) // timedelta(minutes=1))  # both from fleet
    expected = Decimal(node_minutes) / 10
    assert report["total_cost"] == expected
    parts = sum(r["cost"] for r in report["rows"])
    if group_by in ("cluster", "node"):
        parts += sum(r["idle_cost"] + r["unknown_cost"] for r in report["rows"])
    else:
        parts += report["idle_cost"] + report["unknown_cost"]
    assert parts == expected


def test_twice_the_compute_is_charged_twice_as_much(fleet):
    rows = {r["model"]: r for r in _report(fleet, fleet + timedelta(minutes=9), "model")["rows"]}
    assert rows["a"]["cost"] == 2 * rows["b"]["cost"] == Decimal("0.30")
    assert rows["a"]["cost_per_1k"] == Decimal("0.3367")  # 0.30 / 891 successes x 1000
    assert rows["a"]["requests"] == 900 and rows["a"]["successes"] == 891
    assert rows["a"]["compute_hours"] == pytest.approx(9 * 20 / 3600, abs=1e-6)


def test_stored_hourly_and_daily_rollups_answer_what_the_minutes_answer(fleet):
    since, until = fleet - timedelta(days=1, hours=10), fleet + timedelta(days=1, minutes=5)
    live = {g: _report(since, until, g) for g in selectors.GROUP_KEYS}
    call_command("cost_rollup", "--since", (since - timedelta(hours=1)).isoformat())
    for period in ("day", "hc", "dc"):  # per node by day; per cluster by hour and day
        assert CostRollup.objects.filter(period=period).exists(), period
    assert not CostRollup.objects.filter(period="hour", start__lt=fleet).exists()  # not seen yet
    again = call_command("cost_rollup", "--since", (since - timedelta(hours=1)).isoformat())
    assert again is None  # idempotent: the rebuilt hours replaced themselves
    hours = CostRollup.objects.filter(period="hour", node_name="n1", kind="model")
    assert hours.count() == 2  # a and b in one hour, not doubled
    for group_by, report in live.items():
        assert _report(since, until, group_by) == report


def test_previous_period_change(fleet):
    report = _report(fleet + timedelta(minutes=5), fleet + timedelta(minutes=10), "model")
    assert {r["change_pct"] for r in report["rows"]} == {0.0}
    first = _report(fleet, fleet + timedelta(minutes=5), "model")
    assert {r["change_pct"] for r in first["rows"]} == {None}  # nothing before


@pytest.mark.parametrize(
    ("role", "superuser", "status"),
    [
        ("managers", False, 200),
        ("release-managers", False, 200),
        (None, True, 200),
        ("algorithm", False, 200),  # its own teams' rows only (below)
        (None, False, 403),
    ],
)
def test_who_reads_reports(fleet, make_user, role, superuser, status):
    client = APIClient()
    client.force_authenticate(make_user("u", role=role, superuser=superuser))
    assert client.get("/api/v1/reports/cost/").status_code == status
    assert client.get("/api/v1/reports/ghosts/").status_code == status


def test_the_algorithm_team_reads_only_its_own_teams_rows(fleet, make_user):
    other = Team.objects.create(name="search")
    Model.objects.create(name="c", team=other)
    member, outsider = make_user("ada", role="algorithm"), make_user("sam", role="algorithm")
    Team.objects.get(name="fraud").members.add(member)
    other.members.add(outsider)
    since, until = fleet.isoformat(), (fleet + timedelta(minutes=10)).isoformat()
    seen = {}
    for user in (member, outsider):
        client = APIClient()
        client.force_authenticate(user)
        answer = client.get("/api/v1/reports/cost/", {"from": since, "to": until})
        assert answer.status_code == 200
        rows = answer.json()["rows"]
        seen[user.username] = {row["model"]: Decimal(str(row["cost"])) for row in rows}
        assert Decimal(str(answer.json()["idle_cost"])) == 0  # idle belongs to no team
    everything = _report(fleet, fleet + timedelta(minutes=10), "model")
    assert seen["ada"] == {r["model"]: Decimal(str(r["cost"])) for r in everything["rows"]}
    assert seen["sam"] == {}


def test_anonymous_gets_no_report():
    assert APIClient().get("/api/v1/reports/cost/").status_code in (401, 403)


@pytest.fixture
def manager(make_user):
    client = APIClient()
    client.force_authenticate(make_user("mia", role="managers"))
    return client


@pytest.mark.parametrize("how", ["format", "accept"])
def test_csv_has_the_json_rows(fleet, manager, how):
    params = {
        "from": fleet.isoformat(),
        "to": (fleet + timedelta(minutes=10)).isoformat(),
        "group_by": "node",
    }
    as_json = manager.get("/api/v1/reports/cost/", params).json()
    if how == "format":
        answer = manager.get("/api/v1/reports/cost/", {**params, "format": "csv"})
    else:
        answer = manager.get("/api/v1/reports/cost/", params, HTTP_ACCEPT="text/csv")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.content.decode())))
    assert len(rows) == len(as_json["rows"]) == 2
    for got, want in zip(rows, as_json["rows"], strict=True):
        assert list(got) == list(want)
        for key, value in want.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert float(got[key]) == pytest.approx(value), key
            else:
                assert got[key] == ("" if value is None else str(value)), key


def test_default_range_is_the_current_month(manager):
    body = manager.get("/api/v1/reports/cost/").json()
    now = timezone.now().astimezone(UTC)
    assert body["from"].startswith(f"{now:%Y-%m}-01T00:00:00")
    assert body["currency"] == "USD" and body["rows"] == []


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("cost", {"from": "yesterday"}, "from"),
        ("cost", {"to": "2026-13-40"}, "to"),
        ("cost", {"from": "2026-11-02", "to": "2026-11-01"}, "to"),
        ("cost", {"from": "2020-01-01", "to": "2026-01-01"}, "to"),
        ("cost", {"group_by": "colour"}, "group_by"),
        ("cost", {"kind": "training"}, "kind"),
        ("cost", {"format": "xml"}, "format"),
        ("ghosts", {"days": "0"}, "days"),
        ("ghosts", {"days": "many"}, "days"),
        ("ghosts", {"days": "1000"}, "days"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(manager, path, params, field):
    answer = manager.get(f"/api/v1/reports/{path}/", params)
    assert answer.status_code == 400, answer.content
    assert [e["field"] for e in answer.json()["errors"]] == [field]


def test_the_periodic_rollup_starts_at_the_first_telemetry_and_moves_its_watermark(fleet):
    from reports.models import CostWatermark
    from reports.tasks import cost_rollup

    hour = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    assert cost_rollup() > 0
    mark = CostWatermark.objects.get().until
    assert mark == min(hour, fleet + timedelta(hours=48))  # a run does at most 48 hours
    assert CostRollup.objects.filter(period="hour").earliest("start").start == fleet
    cost_rollup()
    assert CostWatermark.objects.get().until == hour  # the next run went on
    before = CostRollup.objects.count()
    assert cost_rollup() > 0  # the last hours again, replacing themselves
    assert CostRollup.objects.count() == before


@pytest.mark.parametrize(
    ("budget", "level", "pct"),
    [("10.00", "ok", 5.0), ("0.60", "warning", 83.3), ("0.50", "over", 100.0)],
)
def test_team_budget_marks_80_and_100_percent(fleet, budget, level, pct):
    from reports.models import TeamBudget

    TeamBudget.objects.create(team=Team.objects.get(name="fraud"), monthly_budget=budget)
    (status,) = selectors.budgets_status(now=fleet + timedelta(hours=1))
    assert status["month_to_date"] == Decimal("0.50")  # a and b over their 10 minutes
    assert (status["level"], status["used_pct"]) == (level, pct)


def test_managers_set_budgets_and_it_is_audited(fleet, manager, make_user):
    from audit.models import AuditEvent

    answer = manager.put("/api/v1/reports/budgets/fraud/", {"monthly_budget": "250.00"})
    assert answer.status_code == 200
    rows = manager.get("/api/v1/reports/budgets/").json()["rows"]
    assert [(r["team"], r["monthly_budget"]) for r in rows] == [("fraud", 250.0)]
    event = AuditEvent.objects.get(action="team.budget_set")
    assert event.details == {"before": None, "after": "250.00"}
    bad = manager.put("/api/v1/reports/budgets/fraud/", {"monthly_budget": "-1"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "monthly_budget"
    assert manager.put("/api/v1/reports/budgets/nope/", {"monthly_budget": "1"}).status_code == 404
    rita = APIClient()
    rita.force_authenticate(make_user("rita", role="release-managers"))
    assert rita.put("/api/v1/reports/budgets/fraud/", {"monthly_budget": "1"}).status_code == 403
    assert manager.put(
        "/api/v1/reports/budgets/fraud/", {"monthly_budget": None}, format="json"
    ).json() == {"team": "fraud", "monthly_budget": None}
    assert manager.get("/api/v1/reports/budgets/").json()["rows"] == []


def test_the_reports_page_marks_a_team_over_budget_for_its_members(client, make_user):
    from reports.models import TeamBudget

    now = timezone.now().replace(second=0, microsecond=0)
    cluster = TritonCluster.objects.create(name="p", environment="production", node_hourly_cost=6)
    TritonNode.objects.create(cluster=cluster, name="n1", http_url="http://127.0.0.1:1")
    team = Team.objects.create(name="fraud")
    Model.objects.create(name="a", team=team)
    for i in (3, 2):
        minute = now - timedelta(minutes=i)
        Rollup.objects.create(cluster=cluster, node_name="n1", minute=minute)
        Rollup.objects.create(
            cluster=cluster, node_name="n1", model_name="a", version="1", minute=minute,
            requests=10, successes=10, compute_us=60e6,
        )  # fmt: skip
    TeamBudget.objects.create(team=team, monthly_budget="0.10")
    ada = make_user("ada", role="algorithm")
    team.members.add(ada)  # the algorithm team sees its own teams' budgets (like the API)
    client.force_login(ada)
    page = client.get("/reports/?range=3h&chart=team&group_by=team").content.decode()
    assert 'data-level="over"' in page and "over budget" in page
    assert "cost-figure" in page and '"stackgroup":"cost"' in page.replace(" ", "")


def test_a_node_added_with_a_gpu_price_is_charged_per_gpu(make_user):
    from reports.minutes import node_prices

    client = APIClient()
    client.force_authenticate(make_user("rita", role="release-managers"))
    TritonCluster.objects.create(name="gpu", environment="production", node_hourly_cost=1)
    body = {
        "name": "g1",
        "http_url": "http://127.0.0.1:8000",
        "gpu_hourly_cost": "2.5000",
        "gpu_count": 4,
    }
    answer = client.post("/api/v1/clusters/gpu/nodes/", body, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["gpu_count"] == 4 and answer.json()["hourly_cost"] is None
    node = TritonNode.objects.get(name="g1")
    now = timezone.now()
    price = node_prices(now)[(node.cluster_id, "g1")].at(now.replace(second=0, microsecond=0))
    assert price.minute_ticks == 100_000 and price.slots == 4  # 10.00 an hour, 4 GPUs
    refused = client.post("/api/v1/clusters/gpu/nodes/", {**body, "name": "g2", "gpu_count": -1})
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "gpu_count"


def test_the_model_cost_tab_shows_only_that_models_cost(fleet, client, make_user):
    only = selectors.cost_report(
        since=fleet, until=fleet + timedelta(minutes=10), group_by="version", models={"a"}
    )
    assert [(r["model"], r["version"], r["cost"]) for r in only["rows"]] == [
        ("a", "1", Decimal("0.33"))
    ]
    assert only["total_cost"] == Decimal("0.33") and only["idle_cost"] == 0
    client.force_login(make_user("viewer", role="managers"))
    page = client.get("/models/a/cost/").content.decode()
    assert "0.33 USD" in page and 'data-testid="model-cost-versions"' in page
    assert client.get("/models/nope/cost/").status_code == 404
    assert 'href="/models/a/cost/"' in client.get("/models/a/").content.decode()


def test_idle_can_be_shared_out_in_proportion_to_cost(fleet, manager):
    params = {
        "from": fleet.isoformat(),
        "to": (fleet + timedelta(minutes=10)).isoformat(),
        "share_idle": "true",
    }
    body = manager.get("/api/v1/reports/cost/", params).json()
    rows = {r["model"]: r for r in body["rows"]}
    assert body["idle_cost"] == 1.0  # n1's 0.50 and n2's 0.50, still shown on its own
    assert rows["a"]["shared_idle"] == pytest.approx(2 * rows["b"]["shared_idle"], abs=0.015)
    assert sum(r["shared_idle"] for r in body["rows"]) == pytest.approx(body["idle_cost"])
    plain = manager.get("/api/v1/reports/cost/", {**params, "share_idle": "false"}).json()
    assert "shared_idle" not in plain["rows"][0]
    refused = manager.get("/api/v1/reports/cost/", {**params, "group_by": "node"})
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "share_idle"


def test_a_first_rebuild_that_starts_after_the_first_telemetry_leaves_no_false_watermark(fleet):
    from reports.models import CostWatermark

    call_command("cost_rollup", "--since", (fleet + timedelta(hours=1)).isoformat())
    assert not CostWatermark.objects.exists()  # reports keep computing the gap live
    before = _report(fleet, fleet + timedelta(hours=3), "node")
    call_command("cost_rollup", "--since", fleet.isoformat())
    assert CostWatermark.objects.exists()
    assert _report(fleet, fleet + timedelta(hours=3), "node") == before


def test_the_console_cost_pages_scope_rows_and_budgets_like_the_api(fleet, make_user):
    from django.test import Client

    from reports.services import team_budget_set

    other = Team.objects.create(name="search")
    Model.objects.create(name="c", team=other)
    manager = make_user("mia", role="managers")
    for team in (Team.objects.get(name="fraud"), other):
        team_budget_set(team=team, monthly_budget=Decimal("100.00"), actor=manager)
    member, outsider = make_user("ada", role="algorithm"), make_user("sam", role="algorithm")
    Team.objects.get(name="fraud").members.add(member)
    other.members.add(outsider)
    seen = {}
    for user in (manager, member, outsider):
        client = Client()
        client.force_login(user)
        page = client.get("/reports/", {"range": "7d", "group_by": "model"})
        assert page.status_code == 200
        rows = {row["model"] for row in page.context["report"]["rows"] if row["cost"]}
        seen[user.username] = (rows, {b["team"] for b in page.context["budgets"]})
        assert (client.get("/models/a/cost/").status_code == 200) == (user != outsider)
        home = client.get("/", {"tab": "costs"}).context["month"]
        assert {r["model"] for r in home["top_models"]} <= (
            {"a", "b"} if user != outsider else set()
        )
    assert seen["mia"] == ({"a", "b"}, {"fraud", "search"})
    assert seen["ada"] == ({"a", "b"}, {"fraud"})
    assert seen["sam"] == (set(), {"search"})  # no other team's rows or budgets
    nobody = Client()
    nobody.force_login(make_user("noel"))
    assert nobody.get("/reports/").status_code == 403  # no reports role, like the API
