"""Reads of reports: cost per group over a range, and ghost versions.

A range is read from stored day rows for its whole days, hour rows for its other whole
hours up to the rollup watermark, and the minutes around them (not yet rolled up, or a
range that does not start on the hour) from the minute rollups, on the fly. It ends at
the last complete minute.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from deployments.models import TritonCluster
from models_registry.models import Model
from reports.costing import change_pct, cost_per_1k, largest_remainder, to_cents
from reports.minutes import Line, cost_lines
from reports.models import CostRollup, CostWatermark, TeamBudget
from reports.services import DAY, HOUR, floor_day, floor_hour
from telemetry.models import Rollup

GROUP_KEYS = {
    "model": ("model",),
    "version": ("model", "version"),
    "team": ("team",),
    "cluster": ("cluster",),
    "node": ("cluster", "node"),
}
# Groups that own nodes carry their idle and unknown cost on their own row.
NODE_GROUPS = ("cluster", "node")
# A ghost must still be loaded: seen within this long before the end of the window.
GHOST_RECENT = timedelta(minutes=15)
MONTH_MINUTES = 30 * 24 * 60

Key5 = tuple  # cluster id, node, kind, model, version (None where not grouped by it)
FIELDS = ("cluster_id", "node_name", "kind", "model_name", "version")
GROUP_FIELDS = {
    "model": ("kind", "model_name"),
    "version": ("kind", "model_name", "version"),
    "team": ("kind", "model_name"),
    "cluster": ("cluster_id", "kind"),
    "node": ("cluster_id", "node_name", "kind"),
}


def floor_minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _ceil(at: datetime, floor: Callable[[datetime], datetime], step: timedelta) -> datetime:
    return at if floor(at) == at else floor(at) + step


def _narrow(key: tuple, by: tuple[str, ...]) -> Key5:
    return tuple(v if f in by else None for f, v in zip(FIELDS, key, strict=True))


def _stored(period: str, since: datetime, until: datetime, into: dict, by) -> None:
    if since >= until:
        return
    if "node_name" not in by:  # the rows summed over each cluster's nodes serve
        period = {"hour": "hc", "day": "dc"}[period]
    rows = (
        CostRollup.objects.filter(period=period, start__gte=since, start__lt=until)
        .values_list(*by)
        .annotate(
            Sum("cost_ticks"),
            Sum("idle_share_ticks"),
            Sum("requests"),
            Sum("successes"),
            Sum("compute_us"),
            Sum("minutes"),
        )
        .order_by()
    )
    for row in rows:
        key = dict(zip(by, row, strict=False))
        into[tuple(key.get(f) for f in FIELDS)].add(Line(*row[len(by) :]))


def _live(since: datetime, until: datetime, into: dict, by) -> None:
    if since >= until:
        return
    for (cluster_id, node, _at, *rest), line in cost_lines(since, until).items():
        into[_narrow((cluster_id, node, *rest), by)].add(line)


def range_lines(since: datetime, until: datetime, *, by=FIELDS) -> dict[Key5, Line]:
    """Cost lines of [since, until) (whole minutes), stored where possible, else live.

    Keys keep only the fields in `by` (the others are None): fewer groups, faster sums.
    """
    lines: dict[Key5, Line] = defaultdict(Line)
    mark = CostWatermark.objects.filter(name="hourly").values_list("until", flat=True).first()
    hours_from = _ceil(since, floor_hour, HOUR)
    hours_to = min(floor_hour(until), mark) if mark else hours_from
    if hours_from >= hours_to:
        _live(since, until, lines, by)
        return dict(lines)
    _live(since, hours_from, lines, by)
    days_from, days_to = _ceil(hours_from, floor_day, DAY), floor_day(hours_to)
    if days_from < days_to:
        _stored("hour", hours_from, days_from, lines, by)
        _stored("day", days_from, days_to, lines, by)
        _stored("hour", days_to, hours_to, lines, by)
    else:
        _stored("hour", hours_from, hours_to, lines, by)
    _live(hours_to, until, lines, by)
    return dict(lines)


def fields_for(group_by: str, models: set[str] | None = None) -> tuple[str, ...]:
    """The key fields a grouping needs (and the model name to filter by models)."""
    by = GROUP_FIELDS[group_by]
    return by if models is None or "model_name" in by else (*by, "model_name")


def group_namer(group_by: str) -> Callable[[Key5], tuple]:
    clusters = dict(TritonCluster.objects.values_list("id", "name"))
    teams = dict(Model.objects.values_list("name", "team__name"))

    def name(key: Key5) -> tuple:
        cluster_id, node, _kind, model, version = key
        return {
            "model": (model,),
            "version": (model, version),
            "team": (teams.get(model, ""),),
            "cluster": (clusters.get(cluster_id, str(cluster_id)),),
            "node": (clusters.get(cluster_id, str(cluster_id)), node),
        }[group_by]

    return name


def _grouped(lines: dict[Key5, Line], group_by: str) -> tuple[dict, dict[str, int]]:
    """Group -> Line of model use, and the idle/unknown ticks per (kind, group or None)."""
    name = group_namer(group_by)
    groups: dict[tuple, Line] = defaultdict(Line)
    rest: dict = defaultdict(int)
    for key, line in lines.items():
        kind = key[2]
        if kind == "model":
            groups[name(key)].add(line)
        elif group_by in NODE_GROUPS:
            groups.setdefault(name(key), Line())  # a node with idle time only has a row
            rest[(kind, name(key))] += line.cost_ticks
        else:
            rest[(kind, None)] += line.cost_ticks
    return dict(groups), dict(rest)


def clip_range(since: datetime, until: datetime, now: datetime | None = None):
    """Whole minutes, ending at the last complete minute."""
    last = floor_minute(now or timezone.now())
    return floor_minute(since), min(_ceil(until, floor_minute, timedelta(minutes=1)), last)


def _only(lines: dict[Key5, Line], models: set[str] | None) -> dict[Key5, Line]:
    if models is None:
        return lines
    return {k: v for k, v in lines.items() if k[2] == "model" and k[3] in models}


def _share_idle(rows: list[dict], groups: dict, idle_cents: Decimal) -> None:
    """Each row's part of the idle cost in proportion to its cost (OpenCost's shareIdle),
    in whole cents that add up to the idle cost."""
    weights = {i: groups[r["_group"]].cost_ticks for i, r in enumerate(rows)}
    parts = largest_remainder(int(idle_cents * 100), weights)
    for i, row in enumerate(rows):
        row["shared_idle"] = Decimal(parts.get(i, 0)).scaleb(-2)


def cost_report(
    *,
    since: datetime,
    until: datetime,
    group_by: str,
    models: set[str] | None = None,
    share_idle: bool = False,
    now=None,
) -> dict:
    """What each group cost in [since, until): rows, idle, unknown, all to the cent.

    With `models`, only those models' rows (no idle or unknown: they belong to no model).
    With `share_idle` (model, version or team groupings), each row also gets its
    `shared_idle`: the idle cost split in proportion to the rows' costs.
    """
    since, until = clip_range(since, until, now)
    until = max(since, until)
    by = fields_for(group_by, models)
    groups, rest = _grouped(_only(range_lines(since, until, by=by), models), group_by)
    span = until - since
    previous = _only(range_lines(since - span, since, by=by), models) if span else {}
    before, _ = _grouped(previous, group_by)
    items = {("cost", g): line.cost_ticks for g, line in groups.items()} | rest
    cents = to_cents(items)
    total_ticks = sum(items.values())
    rows = [
        _row(group_by, g, line, cents, rest, total_ticks, before.get(g))
        for g, line in groups.items()
    ]
    rows.sort(key=lambda r: (-r["cost"], [str(r[k]) for k in GROUP_KEYS[group_by]]))
    money = sum(cents.values())
    idle = sum(v for k, v in cents.items() if k[0] == "idle")
    unknown = sum(v for k, v in cents.items() if k[0] == "unknown")
    if share_idle and group_by not in NODE_GROUPS:
        _share_idle(rows, groups, idle)
    for row in rows:
        del row["_group"]
    return {
        "from": since.isoformat(),
        "to": until.isoformat(),
        "group_by": group_by,
        "currency": settings.SWITCHYARD_CURRENCY,
        "total_cost": money,
        "idle_cost": idle,
        "unknown_cost": unknown,
        "rows": rows,
    }


def _row(group_by, group, line: Line, cents, rest, total_ticks, before: Line | None) -> dict:
    row = dict(zip(GROUP_KEYS[group_by], group, strict=True))
    row["_group"] = group
    row["cost"] = cents[("cost", group)]
    if group_by in NODE_GROUPS:
        row["idle_cost"] = cents.get(("idle", group), 0)
        row["unknown_cost"] = cents.get(("unknown", group), 0)
    row.update(
        share=round(line.cost_ticks / total_ticks, 4) if total_ticks else 0.0,
        requests=line.requests,
        successes=line.successes,
        compute_hours=round(line.compute_us / 3.6e9, 6),
        cost_per_1k=cost_per_1k(line.cost_ticks, line.successes),
        change_pct=change_pct(line.cost_ticks, before.cost_ticks if before else 0),
    )
    return row


def team_model_names(*, user) -> set[str]:
    """The names of the models of the teams `user` is a member of."""
    return set(Model.objects.filter(team__members=user).values_list("name", flat=True))


def ghosts(*, days: float, now: datetime | None = None) -> dict:
    """Versions loaded at the end of the last `days` with no request in them, and their
    cost: their compute share plus an equal share of their nodes' idle time."""
    until = floor_minute(now or timezone.now())
    since = floor_minute(until - timedelta(days=days))
    lines = range_lines(since, until)
    loaded = set(
        Rollup.objects.filter(minute__gte=max(since, until - GHOST_RECENT), minute__lt=until)
        .exclude(model_name="")
        .values_list("cluster_id", "node_name", "model_name", "version")
        .distinct()
    )
    node_cost: dict[tuple[int, str], int] = defaultdict(int)
    for (cluster_id, node, *_), line in lines.items():
        node_cost[(cluster_id, node)] += line.cost_ticks
    clusters = dict(TritonCluster.objects.values_list("id", "name"))
    rows = []
    for (cluster_id, node, kind, model, version), line in lines.items():
        if kind != "model" or line.requests or (cluster_id, node, model, version) not in loaded:
            continue
        rows.append(_ghost(clusters, (cluster_id, node, model, version), line, node_cost))
    rows.sort(key=lambda r: (-r["projected_monthly_cost"], r["model"], r["version"], r["node"]))
    return {
        "from": since.isoformat(),
        "to": until.isoformat(),
        "days": days,
        "currency": settings.SWITCHYARD_CURRENCY,
        "rows": rows,
    }


def _ghost(clusters, key, line: Line, node_cost) -> dict:
    cluster_id, node, model, version = key
    ticks = line.cost_ticks + line.idle_share_ticks
    whole = node_cost[(cluster_id, node)]
    (cost,) = to_cents({0: ticks}).values()
    (monthly,) = to_cents({0: ticks * MONTH_MINUTES // max(1, line.minutes)}).values()
    return {
        "model": model,
        "version": version,
        "cluster": clusters.get(cluster_id, str(cluster_id)),
        "node": node,
        "days_loaded": round(line.minutes / 1440, 4),
        "cost": cost,
        "cost_share": round(ticks / whole, 4) if whole else 0.0,
        "projected_monthly_cost": monthly,
    }


def month_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def budgets_status(*, now: datetime | None = None) -> list[dict]:
    """Every team with a budget: month-to-date cost, percent used, and "ok", "warning"
    (80% or more) or "over" (100% or more)."""
    now = now or timezone.now()
    budgets = list(TeamBudget.objects.select_related("team").order_by("team__name"))
    if not budgets:
        return []
    report = cost_report(since=month_start(now), until=now, group_by="team", now=now)
    spent = {row["team"]: row["cost"] for row in report["rows"]}
    out = []
    for b in budgets:
        cost = spent.get(b.team.name, Decimal("0.00"))
        pct = round(float(cost / b.monthly_budget * 100), 1) if b.monthly_budget else None
        level = "ok" if pct is None or pct < 80 else ("warning" if pct < 100 else "over")
        out.append(
            {
                "team": b.team.name,
                "monthly_budget": b.monthly_budget,
                "month_to_date": cost,
                "used_pct": pct,
                "level": level,
            }
        )
    return out


def version_costs(*, cluster_id: int, model: str, since: datetime, until: datetime) -> dict:
    """{version: {"cost", "successes", "cost_per_1k"}} of one model on one cluster."""
    since, until = clip_range(since, until)
    per_version: dict[str, Line] = defaultdict(Line)
    if since < until:
        by = ("cluster_id", "kind", "model_name", "version")
        for (c, _node, kind, m, version), line in range_lines(since, until, by=by).items():
            if c == cluster_id and kind == "model" and m == model:
                per_version[version].add(line)
    cents = to_cents({v: line.cost_ticks for v, line in per_version.items()})
    return {
        v: {
            "cost": cents[v],
            "successes": line.successes,
            "cost_per_1k": cost_per_1k(line.cost_ticks, line.successes),
        }
        for v, line in per_version.items()
    }


def month_overview(*, now: datetime | None = None, top: int = 5) -> dict:
    """This month so far (the managers' home): its cost, the change against the same days
    of last month, the costliest models and the costliest ghosts."""
    now = now or timezone.now()
    start = month_start(now)
    last_start = month_start(start - timedelta(days=1))
    last_until = min(last_start + (now - start), start)
    report = cost_report(since=start, until=now, group_by="model", now=now)
    before = cost_report(since=last_start, until=last_until, group_by="model", now=now)
    total, previous = report["total_cost"], before["total_cost"]
    return {
        "currency": report["currency"],
        "from": start,
        "total_cost": total,
        "previous_cost": previous,
        "change_pct": change_pct(int(total * 100), int(previous * 100)),
        "top_models": [
            {**r, "share_pct": round(r["share"] * 100, 2)} for r in report["rows"][:top]
        ],
        "ghosts": ghosts(days=7, now=now)["rows"][:top],
    }
