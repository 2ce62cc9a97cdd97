"""Month rows ("mc", summed over a cluster's nodes): the hourly rollup derives them from its
day rows, and a report over a whole calendar month reads them and answers to the cent
what the minutes answer. Minutes written directly, as tests/reports/test_cost_report.py."""

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db.models import Sum
from django.utils import timezone

from deployments.models import TritonCluster, TritonNode
from models_registry.models import Model, Team
from reports import selectors
from reports.models import CostRollup
from reports.services import floor_month, next_month
from telemetry.models import Rollup

pytestmark = pytest.mark.django_db


def _minutes(cluster, start: datetime, count: int) -> list[Rollup]:
    rows = []
    for i in range(count):
        minute = start + timedelta(minutes=i)
        rows.append(Rollup(cluster=cluster, node_name="n1", minute=minute))
        rows.append(Rollup(cluster=cluster, node_name="n2", minute=minute))
        for model, compute in (("a", 20e6), ("b", 10e6)):
            rows.append(
                Rollup(cluster=cluster, node_name="n1", model_name=model, version="1",
                       minute=minute, requests=100, successes=99, compute_us=compute)
            )  # fmt: skip
    return rows


@pytest.fixture
def month():
    """The calendar month before last (whole, and over a month before now whatever today is:
    no range here reaches the present), with busy minutes on its 10th, around both its ends,
    and none in between."""
    last_month = floor_month(floor_month(timezone.now()) - timedelta(days=1))
    first = floor_month(last_month - timedelta(days=1))
    after = next_month(first)
    cluster = TritonCluster.objects.create(
        name="prod", environment="production", node_hourly_cost=Decimal("6.0000")
    )
    for port, name in enumerate(("n1", "n2"), start=1):
        TritonNode.objects.create(cluster=cluster, name=name, http_url=f"http://127.0.0.1:{port}")
    team = Team.objects.create(name="fraud")
    for name in ("a", "b"):
        Model.objects.create(name=name, team=team)
    rows = _minutes(cluster, first - timedelta(minutes=20), 40)  # 20 before, 20 in
    rows += _minutes(cluster, first + timedelta(days=9, hours=12), 30)
    rows += _minutes(cluster, after - timedelta(minutes=15), 45)  # 15 in, 30 after
    Rollup.objects.bulk_create(rows)
    return first, after


def test_a_whole_month_is_read_from_its_month_rows_and_answers_what_the_minutes_answer(month):
    first, after = month
    since, until = first - timedelta(minutes=30), after + timedelta(hours=2, minutes=7)
    live = {g: selectors.cost_report(since=since, until=until, group_by=g)
            for g in selectors.GROUP_KEYS}  # fmt: skip
    assert {r["model"] for r in live["model"]["rows"]} == {"a", "b"}
    call_command("cost_rollup", "--since", (since - timedelta(hours=1)).isoformat(),
                 "--until", (until + timedelta(hours=1)).isoformat())  # fmt: skip
    months = CostRollup.objects.filter(period="mc")
    assert set(months.values_list("start", flat=True)) == {
        floor_month(first - timedelta(days=1)),
        first,
        after,
    }
    in_month = CostRollup.objects.filter(period="dc", start__gte=first, start__lt=after)
    assert months.filter(start=first).aggregate(Sum("cost_ticks")) == in_month.aggregate(
        Sum("cost_ticks")
    )
    segments = selectors.range_segments(since, until, months=True)
    assert ("month", first, after) in segments
    assert all(source != "month" for source, *_ in selectors.range_segments(since, until))
    for group_by, report in live.items():  # by node: the days per node, no month rows
        assert selectors.cost_report(since=since, until=until, group_by=group_by) == report


def test_rebuilding_a_day_rebuilds_its_month_not_doubled(month):
    first, after = month
    call_command("cost_rollup", "--since", (first - timedelta(hours=1)).isoformat(),
                 "--until", (after + timedelta(hours=1)).isoformat())  # fmt: skip
    before = list(CostRollup.objects.filter(period="mc").order_by("pk").values_list(
        "start", "model_name", "cost_ticks", "requests"))  # fmt: skip
    tenth = first + timedelta(days=9)
    call_command("cost_rollup", "--since", tenth.isoformat(),
                 "--until", (tenth + timedelta(days=1)).isoformat())  # fmt: skip
    again = sorted(CostRollup.objects.filter(period="mc").values_list(
        "start", "model_name", "cost_ticks", "requests"))  # fmt: skip
    assert again == sorted(before) and again
