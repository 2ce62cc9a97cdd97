"""Writes of reports: the stored hourly and daily cost rollups.

Cost rollups are derived numbers, rebuilt from telemetry at will, so they leave no audit
event (as telemetry's own rollups).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from audit.services import audit_record
from reports.minutes import cost_lines
from reports.models import CostRollup, CostWatermark, TeamBudget
from telemetry.models import Rollup

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# Minutes reach the database about a minute after they end: rebuilding the last hours
# again on each run picks up late rows (a rebuild replaces, so it is harmless).
REBUILD_HOURS = 2
# About 5 s of work per hour for 20 nodes x 200 versions (bench/cost_report.py): a run
# stays well inside the task's 600 s limit.
MAX_HOURS_PER_RUN = timedelta(hours=48)

# Derived rows, summed in SQL: whole days per node ("day") from the hour rows, hours and
# days summed over a cluster's nodes ("hc", "dc": one row per model version instead of one
# per node and version, so reports that do not group by node read ~20x fewer rows), and
# calendar months from those days ("mc": a year's report reads 12 rows a version, not 365).
_DERIVED = """
INSERT INTO reports_costrollup (
    cluster_id, node_name, period, start, kind, model_name, version, cost_kind, cost_ticks,
    idle_share_ticks, requests, successes, compute_us, minutes, output_tokens
)
SELECT cluster_id, {node}, %s, {start}, kind, model_name, version, cost_kind, SUM(cost_ticks),
    SUM(idle_share_ticks), SUM(requests), SUM(successes), SUM(compute_us), SUM(minutes),
    SUM(output_tokens)
FROM reports_costrollup
WHERE period = %s AND start >= %s AND start < %s
GROUP BY cluster_id, 2, 4, kind, model_name, version, cost_kind
"""
_DAY_START = "date_trunc('day', start AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
_MONTH_START = "date_trunc('month', start AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
DERIVED = (  # (period made, from period, per node?, start expression)
    ("day", "hour", True, _DAY_START),
    ("hc", "hour", False, "start"),
    ("dc", "hour", False, _DAY_START),
    ("mc", "dc", False, _MONTH_START),
)


def derive(period: str, since: datetime, until: datetime) -> None:
    """Replace the derived rows of `period` whose start lies in [since, until)."""
    made, source, per_node, start = next(d for d in DERIVED if d[0] == period)
    sql = _DERIVED.format(node="node_name" if per_node else "''", start=start)
    CostRollup.objects.filter(period=made, start__gte=since, start__lt=until).delete()
    with connection.cursor() as cursor:
        cursor.execute(sql, [made, source, since, until])


def floor_hour(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def floor_day(at: datetime) -> datetime:
    return floor_hour(at).replace(hour=0)


def floor_month(at: datetime) -> datetime:
    return floor_day(at).replace(day=1)


def next_month(at: datetime) -> datetime:
    """The start of the calendar month after the one `at` lies in."""
    return floor_month(floor_month(at) + timedelta(days=32))


def _build_hour(start: datetime) -> int:
    lines = cost_lines(start, start + HOUR)
    rows = [
        CostRollup(
            cluster_id=cluster_id,
            node_name=node,
            period=CostRollup.Period.HOUR,
            start=start,
            kind=kind,
            model_name=model,
            version=version,
            cost_kind=cost_kind,
            cost_ticks=line.cost_ticks,
            idle_share_ticks=line.idle_share_ticks,
            requests=line.requests,
            successes=line.successes,
            compute_us=line.compute_us,
            minutes=line.minutes,
            output_tokens=line.output_tokens,
        )
        for (cluster_id, node, _at, kind, model, version, cost_kind), line in lines.items()
    ]
    with transaction.atomic():
        CostRollup.objects.filter(period="hour", start=start).delete()
        CostRollup.objects.bulk_create(rows, batch_size=5000)
    return len(rows)


def _build_days(since: datetime, until: datetime) -> None:
    day, end = floor_day(since), floor_day(until - timedelta(microseconds=1)) + DAY
    with transaction.atomic():
        derive("hc", since, until)
        derive("day", day, end)
        derive("dc", day, end)
        derive("mc", floor_month(day), next_month(end - DAY))  # the months of those days


def _advance_watermark(since: datetime, until: datetime) -> None:
    # The watermark says "every hour before me is stored": it never jumps over a gap.
    mark = CostWatermark.objects.select_for_update().filter(name="hourly").first()
    if mark is None:
        if not Rollup.objects.filter(minute__lt=since).exists():
            CostWatermark.objects.create(name="hourly", until=until)
    elif since <= mark.until < until:
        mark.until = until
        mark.save(update_fields=["until"])


def cost_rollup_build(*, since: datetime, until: datetime | None = None) -> int:
    """Rebuild the hourly (and derived) cost rollups of every complete hour in
    [since, until) (until defaults to now); idempotent: a rebuilt hour replaces its rows.
    Works a day at a time and moves the watermark after each, so a long rebuild that is
    stopped keeps what it finished. The count of hour rows written."""
    start = floor_hour(since)
    end = floor_hour(min(until or timezone.now(), timezone.now()))
    written = 0
    while start < end:
        chunk_end = min(end, floor_day(start) + DAY)
        for hour in range((chunk_end - start) // HOUR):
            written += _build_hour(start + hour * HOUR)
        _build_days(start, chunk_end)
        with transaction.atomic():
            _advance_watermark(start, chunk_end)
        start = chunk_end
    return written


def cost_rollup_catch_up(*, now: datetime | None = None) -> int:
    """The periodic run: complete hours since the watermark (the last REBUILD_HOURS again),
    or since the first telemetry when nothing was rolled up yet; at most MAX_HOURS_PER_RUN
    (the next run goes on), so a first run over months of telemetry stays in its limit."""
    now = now or timezone.now()
    mark = CostWatermark.objects.filter(name="hourly").first()
    if mark is not None:
        since = mark.until - REBUILD_HOURS * HOUR
    else:
        first = Rollup.objects.order_by("minute").values_list("minute", flat=True).first()
        if first is None:
            return 0
        since = first
    return cost_rollup_build(since=since, until=min(now, floor_hour(since) + MAX_HOURS_PER_RUN))


def team_budget_set(*, team, monthly_budget, actor) -> TeamBudget | None:
    """Set (or with None remove) a team's monthly budget; audited."""
    with transaction.atomic():
        current = TeamBudget.objects.select_for_update().filter(team=team).first()
        before = str(current.monthly_budget) if current else None
        if monthly_budget is None:
            if current is not None:
                current.delete()
            budget = None
        else:
            budget, _ = TeamBudget.objects.update_or_create(
                team=team, defaults={"monthly_budget": monthly_budget}
            )
        audit_record(
            actor=actor,
            action="team.budget_set",
            obj=team,
            details={"before": before, "after": None if budget is None else str(monthly_budget)},
        )
    return budget
