"""Reads of reports: cost per group over a range, and ghost versions.

A range is read from stored day rows for its whole days, hour rows for its other whole
hours up to the rollup watermark, and the minutes around them (not yet rolled up, or a
range that does not start on the hour) from the minute rollups, on the fly. It ends at
the last complete minute.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Q, Sum
from django.utils import timezone

from accounts.roles import Role, user_has_role
from core.shared import shared_value
from deployments.models import TritonCluster
from deployments.temporary import COST_KINDS, SERVING, charged_to
from models_registry.models import Model
from models_registry.selectors import models_called
from reports.costing import change_pct, cost_per_1k, largest_remainder, ticks_to_money, to_cents
from reports.minutes import Line, cost_lines
from reports.models import CostRollup, CostWatermark, TeamBudget
from reports.services import DAY, HOUR, floor_day, floor_hour, floor_month, next_month
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
ZERO = Decimal("0.00")

# cluster id, node, kind, model, version, cost kind (None where not grouped by it)
Key6 = tuple
FIELDS = ("cluster_id", "node_name", "kind", "model_name", "version", "cost_kind")
# Every grouping keeps the cost kind: rows carry a column per kind.
GROUP_FIELDS = {
    "model": ("kind", "model_name", "cost_kind"),
    "version": ("kind", "model_name", "version", "cost_kind"),
    "team": ("kind", "model_name", "cost_kind"),
    "cluster": ("cluster_id", "kind", "cost_kind"),
    "node": ("cluster_id", "node_name", "kind", "cost_kind"),
}


def floor_minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _ceil(at: datetime, floor: Callable[[datetime], datetime], step: timedelta) -> datetime:
    return at if floor(at) == at else floor(at) + step


def _narrow(key: tuple, by: tuple[str, ...]) -> Key6:
    return tuple(v if f in by else None for f, v in zip(FIELDS, key, strict=True))


def _stored(segments: list[tuple[str, datetime, datetime]], into: dict, by) -> None:
    """Adds the stored rows of every (period, since, until) segment, summed in one query."""
    if "node_name" not in by:  # the rows summed over each cluster's nodes serve
        names = {"hour": "hc", "day": "dc", "month": "mc"}
        segments = [(names[period], a, b) for period, a, b in segments]
    which = Q()
    for period, since, until in segments:
        if since < until:
            which |= Q(period=period, start__gte=since, start__lt=until)
    if not which:
        return
    rows = (
        CostRollup.objects.filter(which)
        .values_list(*by)
        .annotate(
            Sum("cost_ticks"),
            Sum("idle_share_ticks"),
            Sum("requests"),
            Sum("successes"),
            Sum("compute_us"),
            Sum("minutes"),
            Sum("output_tokens"),
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


def range_segments(
    since: datetime, until: datetime, *, months: bool = False
) -> list[tuple[str, datetime, datetime]]:
    """How [since, until) is read: ("day" | "hour", a, b) from stored rows whose start lies
    in [a, b), ("live", a, b) computed from the minute rollups; in time order. With
    `months`, the whole calendar months among the stored days are ("month", a, b): only
    the rows summed over a cluster's nodes have them."""
    mark = CostWatermark.objects.filter(name="hourly").values_list("until", flat=True).first()
    hours_from = _ceil(since, floor_hour, HOUR)
    hours_to = min(floor_hour(until), mark) if mark else hours_from
    if hours_from >= hours_to:
        return [("live", since, until)]
    days_from, days_to = _ceil(hours_from, floor_day, DAY), floor_day(hours_to)
    if days_from < days_to:
        stored = [
            ("hour", hours_from, days_from),
            *_days(days_from, days_to, months),
            ("hour", days_to, hours_to),
        ]
    else:
        stored = [("hour", hours_from, hours_to)]
    segments = [("live", since, hours_from), *stored, ("live", hours_to, until)]
    return [(source, a, b) for source, a, b in segments if a < b]


def _days(since: datetime, until: datetime, months: bool) -> list[tuple[str, datetime, datetime]]:
    """Whole days [since, until): the calendar months among them as months when `months`."""
    months_from = since if floor_month(since) == since else next_month(since)
    months_to = floor_month(until)
    if not months or months_from >= months_to:
        return [("day", since, until)]
    return [
        ("day", since, months_from),
        ("month", months_from, months_to),
        ("day", months_to, until),
    ]


def range_lines(since: datetime, until: datetime, *, by=FIELDS) -> dict[Key6, Line]:
    """Cost lines of [since, until) (whole minutes), stored where possible, else live.

    Keys keep only the fields in `by` (the others are None): fewer groups, faster sums.
    Without the node among them, the rows summed over each cluster's nodes serve, months
    included.
    """
    lines: dict[Key6, Line] = defaultdict(Line)
    segments = range_segments(since, until, months="node_name" not in by)
    for source, a, b in segments:
        if source == "live":
            _live(a, b, lines, by)
    _stored([s for s in segments if s[0] != "live"], lines, by)
    return dict(lines)


def fields_for(group_by: str, models: set[str] | None = None) -> tuple[str, ...]:
    """The key fields a grouping needs (and the model name to filter by models)."""
    by = GROUP_FIELDS[group_by]
    return by if models is None or "model_name" in by else (*by, "model_name")


def group_namer(group_by: str) -> Callable[[Key6], tuple]:
    """key -> the group's name (a tuple of GROUP_KEYS[group_by]); reads only the names the
    grouping needs: the teams' or the clusters'."""
    if group_by == "model":
        return lambda key: (key[3],)
    if group_by == "version":
        return lambda key: (key[3], key[4])
    if group_by == "team":
        teams = dict(Model.objects.values_list("name", "team__name"))
        return lambda key: (teams.get(key[3], ""),)
    clusters = dict(TritonCluster.objects.values_list("id", "name"))
    if group_by == "cluster":
        return lambda key: (clusters.get(key[0], str(key[0])),)
    return lambda key: (clusters.get(key[0], str(key[0])), key[1])


@dataclass
class Group:
    """One row's lines: all it is charged (`line`), its ticks per cost kind, and the lines
    whose requests it counts (`traffic`: serving, or the kind filtered by)."""

    line: Line = field(default_factory=Line)
    kinds: dict[str, int] = field(default_factory=dict)
    traffic: Line = field(default_factory=Line)


def _grouped(lines: dict[Key6, Line], group_by: str, name, traffic_kind: str = SERVING):
    """Group -> Group of model use, and the idle/unknown ticks per (kind, group or None);
    `name`: the group_namer of `group_by`."""
    groups: dict[tuple, Group] = defaultdict(Group)
    rest: dict = defaultdict(int)
    for key, line in lines.items():
        kind, cost_kind = key[2], key[5]
        if kind == "model":
            group = groups[name(key)]
            group.line.add(line)
            group.kinds[cost_kind] = group.kinds.get(cost_kind, 0) + line.cost_ticks
            if cost_kind == traffic_kind:
                group.traffic.add(line)
        elif group_by in NODE_GROUPS:
            groups.setdefault(name(key), Group())  # a node with idle time only has a row
            rest[(kind, name(key))] += line.cost_ticks
        else:
            rest[(kind, None)] += line.cost_ticks
    return dict(groups), dict(rest)


def clip_range(since: datetime, until: datetime, now: datetime | None = None):
    """Whole minutes, ending at the last complete minute."""
    last = floor_minute(now or timezone.now())
    return floor_minute(since), min(_ceil(until, floor_minute, timedelta(minutes=1)), last)


def only_lines(
    lines: dict[Key6, Line], models: set[str] | None, kind: str | None = None
) -> dict[Key6, Line]:
    """The lines of `models` (None: all) of cost kind `kind` (None: all); with either,
    no idle or unknown lines (they belong to no model and no kind)."""
    if models is None and kind is None:
        return lines
    return {
        k: v
        for k, v in lines.items()
        if k[2] == "model" and (models is None or k[3] in models) and kind in (None, k[5])
    }


def _share_idle(rows: list[dict], groups: dict, idle_cents: Decimal) -> None:
    """Each row's part of the idle cost in proportion to its cost (OpenCost's shareIdle),
    in whole cents that add up to the idle cost."""
    weights = {i: groups[r["_group"]].line.cost_ticks for i, r in enumerate(rows)}
    parts = largest_remainder(int(idle_cents * 100), weights)
    for i, row in enumerate(rows):
        row["shared_idle"] = Decimal(parts.get(i, 0)).scaleb(-2)


def cost_report(
    *,
    since: datetime,
    until: datetime,
    group_by: str,
    models: set[str] | None = None,
    kind: str | None = None,
    share_idle: bool = False,
    now=None,
) -> dict:
    """What each group cost in [since, until): rows, idle, unknown, all to the cent; each
    row's cost is the sum of its cost per kind (`serving_cost`, `validation_cost`,
    `benchmark_cost`) to the cent.

    With `models`, only those models' rows (no idle or unknown: they belong to no model);
    with `kind`, only that cost kind's (no idle or unknown either). Requests, successes and
    cost per 1k are the serving lines' (with `kind`, that kind's). With `share_idle` (model,
    version or team groupings), each row also gets its `shared_idle`: the idle cost split
    in proportion to the rows' costs.
    """
    since, until = clip_range(since, until, now)
    until = max(since, until)
    by = fields_for(group_by, models)
    lines = only_lines(range_lines(since, until, by=by), models, kind)
    name = group_namer(group_by)
    groups, rest = _grouped(lines, group_by, name, kind or SERVING)
    span = until - since
    previous = only_lines(range_lines(since - span, since, by=by), models, kind) if span else {}
    before, _ = _grouped(previous, group_by, name)
    items = {("cost", g, k): t for g, group in groups.items() for k, t in group.kinds.items()}
    cents = to_cents(items | rest)
    total_ticks = sum(items.values()) + sum(rest.values())
    rows = [
        _row(group_by, g, group, cents, total_ticks, before.get(g)) for g, group in groups.items()
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


def _row(group_by, name, group: Group, cents, total_ticks, before: Group | None) -> dict:
    row = dict(zip(GROUP_KEYS[group_by], name, strict=True))
    row["_group"] = name
    by_kind = {k: cents.get(("cost", name, k), ZERO) for k in COST_KINDS}
    row["cost"] = sum(by_kind.values(), ZERO)
    row.update({f"{k}_cost": v for k, v in by_kind.items()})
    if group_by in NODE_GROUPS:
        row["idle_cost"] = cents.get(("idle", name), ZERO)
        row["unknown_cost"] = cents.get(("unknown", name), ZERO)
    line, traffic = group.line, group.traffic
    row.update(
        share=round(line.cost_ticks / total_ticks, 4) if total_ticks else 0.0,
        requests=traffic.requests,
        successes=traffic.successes,
        compute_hours=round(line.compute_us / 3.6e9, 6),
        cost_per_1k=cost_per_1k(traffic.cost_ticks, traffic.successes),
        output_tokens=traffic.output_tokens,
        cost_per_1k_tokens=cost_per_1k(traffic.cost_ticks, traffic.output_tokens),
        change_pct=change_pct(line.cost_ticks, before.line.cost_ticks if before else 0),
    )
    return row


def team_model_names(*, user) -> set[str]:
    """The names of the models of the teams `user` is a member of."""
    return set(Model.objects.filter(team__members=user).values_list("name", flat=True))


def may_read_reports(user) -> bool:
    """Managers, release managers, the algorithm team (and superusers) read reports."""
    return user_has_role(
        user, Role.MANAGERS.value, Role.RELEASE_MANAGERS.value, Role.ALGORITHM.value
    )


def visible_models(user) -> set[str] | None:
    """None when the user reads every row; else the names of its teams' models. The API and
    the console scope every cost row, chart, ghost and budget with this."""
    if user_has_role(user, Role.MANAGERS.value, Role.RELEASE_MANAGERS.value):
        return None
    return team_model_names(user=user)


def ghosts_visible(*, user, days: float) -> dict:
    """ghosts() with only the rows of the models `user` may read."""
    report = ghosts(days=days)
    models = visible_models(user)
    if models is not None:
        for part in ("rows", "idle_on_nodes"):
            report[part] = [row for row in report[part] if row["model"] in models]
    return report


def budgets_visible(*, user) -> list[dict]:
    """budgets_status() with only the teams `user` may read (its own, unless it reads all)."""
    rows = budgets_status()
    if visible_models(user) is not None:
        teams = set(user.teams.values_list("name", flat=True))
        rows = [row for row in rows if row["team"] in teams]
    return rows


def ghosts(*, days: float, now: datetime | None = None) -> dict:
    """Versions loaded at the end of the last `days` with no client request in them on any
    node of their cluster (`rows`, one per cluster and version with the nodes it occupies),
    and versions that served on some nodes while idle on others (`idle_on_nodes`, the nodes
    where unloading them would save their cost). A cost is the version's compute share plus
    an equal share of its nodes' idle time; the control plane's own requests (probes,
    warm-ups) are not client requests (telemetry/own_split.py). Only serving lines count: a
    smoke test's or a benchmark's temporary model is never a ghost."""
    until = floor_minute(now or timezone.now())
    since = floor_minute(until - timedelta(days=days))
    lines = range_lines(since, until)
    loaded = _loaded_serving(max(since, until - GHOST_RECENT), until)
    node_cost, per_version = _by_version(lines)
    clusters = dict(TritonCluster.objects.values_list("id", "name"))
    rows, idle = [], []
    for (cluster_id, model, version), by_node in per_version.items():
        occupied = {n: ln for n, ln in by_node.items() if (cluster_id, n, model, version) in loaded}
        unused = {n: ln for n, ln in occupied.items() if not ln.requests}
        if not unused:
            continue
        row = _ghost(clusters, (cluster_id, model, version), unused, node_cost)
        if any(ln.requests for ln in by_node.values()):
            row["serving_nodes"] = sorted(n for n, ln in by_node.items() if ln.requests)
            idle.append(row)
        else:
            rows.append(row)
    return {
        "from": since.isoformat(),
        "to": until.isoformat(),
        "days": days,
        "currency": settings.SWITCHYARD_CURRENCY,
        "rows": sorted(rows, key=_costliest_first),
        "idle_on_nodes": sorted(idle, key=_costliest_first),
    }


def _loaded_serving(since: datetime, until: datetime) -> set[tuple[int, str, str, str]]:
    """(cluster id, node, model, version) of the versions loaded to serve in [since, until):
    temporary models are left out."""
    rows = (
        Rollup.objects.filter(minute__gte=since, minute__lt=until)
        .exclude(model_name="")
        .values_list("cluster_id", "node_name", "model_name", "version")
        .distinct()
    )
    return {
        (cluster_id, node, model, version)
        for cluster_id, node, model, version in rows
        if charged_to(model, version).cost_kind == SERVING
    }


def _by_version(lines: dict) -> tuple[dict, dict]:
    """(each node's cost, {(cluster id, model, version): {node: its line}}) of cost lines,
    the versions' serving lines only (what clients are served by)."""
    node_cost: dict[tuple[int, str], int] = defaultdict(int)
    per_version: dict[tuple[int, str, str], dict[str, Line]] = defaultdict(dict)
    for (cluster_id, node, kind, model, version, cost_kind), line in lines.items():
        node_cost[(cluster_id, node)] += line.cost_ticks
        if kind == "model" and cost_kind == SERVING:
            per_version[(cluster_id, model, version)][node] = line
    return node_cost, per_version


def _costliest_first(row: dict) -> tuple:
    return (-row["projected_monthly_cost"], row["model"], row["version"], row["cluster"])


def _ghost(clusters, key, by_node: dict[str, Line], node_cost) -> dict:
    """One version's row over the nodes where it sat unused: costs summed over them."""
    cluster_id, model, version = key
    ticks = sum(ln.cost_ticks + ln.idle_share_ticks for ln in by_node.values())
    whole = sum(node_cost[(cluster_id, n)] for n in by_node)
    monthly_ticks = sum(
        (ln.cost_ticks + ln.idle_share_ticks) * MONTH_MINUTES // max(1, ln.minutes)
        for ln in by_node.values()
    )
    (cost,) = to_cents({0: ticks}).values()
    (monthly,) = to_cents({0: monthly_ticks}).values()
    return {
        "model": model,
        "version": version,
        "cluster": clusters.get(cluster_id, str(cluster_id)),
        "nodes": sorted(by_node),
        "node_count": len(by_node),
        "days_loaded": round(max(ln.minutes for ln in by_node.values()) / 1440, 4),
        "cost": cost,
        "cost_share": round(ticks / whole, 4) if whole else 0.0,
        "projected_monthly_cost": monthly,
    }


def budgets_status(*, now: datetime | None = None) -> list[dict]:
    """Every team with a budget: month-to-date cost, percent used, and "ok", "warning"
    (80% or more) or "over" (100% or more)."""
    now = now or timezone.now()
    budgets = list(TeamBudget.objects.select_related("team").order_by("team__name"))
    if not budgets:
        return []
    report = cost_report(since=floor_month(now), until=now, group_by="team", now=now)
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
    """{version: {"cost", "successes", "cost_per_1k", "output_tokens", "cost_per_1k_tokens"}}
    of one model on one cluster, serving only (its smoke tests and benchmarks are not what a
    request costs)."""
    since, until = clip_range(since, until)
    per_version: dict[str, Line] = defaultdict(Line)
    if since < until:
        by = ("cluster_id", "kind", "model_name", "version", "cost_kind")
        lines = range_lines(since, until, by=by)
        for (c, _node, kind, m, version, cost_kind), line in lines.items():
            if c == cluster_id and kind == "model" and m == model and cost_kind == SERVING:
                per_version[version].add(line)
    cents = to_cents({v: line.cost_ticks for v, line in per_version.items()})
    return {
        v: {
            "cost": cents[v],
            "successes": line.successes,
            "cost_per_1k": cost_per_1k(line.cost_ticks, line.successes),
            "output_tokens": line.output_tokens,
            "cost_per_1k_tokens": cost_per_1k(line.cost_ticks, line.output_tokens),
        }
        for v, line in per_version.items()
    }


def graph_cost(*, model: Model, since: datetime, until: datetime) -> dict | None:
    """What a model's traffic cost in the models it calls (an ensemble's steps, a BLS model's
    declared calls, any version of it), serving only; None for a model that calls none.

    Per node over the range: each called model's cost there times the share of its requests
    that came through this one (this model's requests / its requests, at most 1: each
    request through the graph is one request of each step). The graph's cost is those
    shares plus its own cost (nil for an ensemble: its compute is its steps',
    reports.minutes). A step called as often directly as through the graph is charged half
    to it; a minute-by-minute split would differ where the mix changed within the range."""
    called = models_called(model=model)
    if not called:
        return None
    since, until = clip_range(since, until)
    by = ("cluster_id", "node_name", "kind", "model_name", "cost_kind")
    lines = range_lines(since, until, by=by) if since < until else {}
    per: dict[tuple[str, tuple], Line] = defaultdict(Line)
    for (cluster_id, node, kind, name, _v, cost_kind), line in lines.items():
        if kind == "model" and cost_kind == SERVING and name in (model.name, *called):
            per[(name, (cluster_id, node))].add(line)
    own = Line()
    for (name, _where), line in per.items():
        if name == model.name:
            own.add(line)
    steps, ticks = [], {"own": own.cost_ticks}
    for name in called:
        step, through = Line(), 0.0
        for (found, where), line in per.items():
            if found != name:
                continue
            step.add(line)
            graph = per.get((model.name, where))
            share = min(1.0, graph.requests / line.requests) if graph and line.requests else 0.0
            through += line.cost_ticks * share
        ticks[name] = round(through)
        steps.append({"model": name, "requests": step.requests, "_ticks": step.cost_ticks})
    cents = to_cents(ticks)  # the shares add up to the graph's total
    for row in steps:
        row["cost"] = ticks_to_money(row.pop("_ticks"))
        row["attributed"] = cents[row["model"]]
    total = sum(cents.values(), ZERO)
    return {
        "steps": steps,
        "own_cost": cents["own"],
        "total_cost": total,
        "requests": own.requests,
        "cost_per_1k": cost_per_1k(sum(ticks.values()), own.successes),
        "currency": settings.SWITCHYARD_CURRENCY,
    }


def month_overview(
    *, now: datetime | None = None, top: int = 5, models: set[str] | None = None
) -> dict:
    """This month so far (the managers' home): its cost, the change against the same days
    of last month, the costliest models and the costliest ghosts (with `models`, theirs
    only)."""
    now = now or timezone.now()
    start = floor_month(now)
    last_start = floor_month(start - timedelta(days=1))
    last_until = min(last_start + (now - start), start)
    report = cost_report(since=start, until=now, group_by="model", now=now, models=models)
    before = cost_report(
        since=last_start, until=last_until, group_by="model", now=now, models=models
    )
    ghost_rows = ghosts(days=7, now=now)["rows"]
    if models is not None:
        ghost_rows = [row for row in ghost_rows if row["model"] in models]
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
        "ghosts": ghost_rows[:top],
    }


def release_costs(release) -> list[dict]:
    """Cost per 1k successful requests of baseline and candidate during the release and,
    once it succeeded, since: [{"label", "baseline", "candidate"}], each side
    {"cost", "successes", "cost_per_1k"} as text, or None. Computed at most
    SWITCHYARD_HOME_CACHE_S ago, once for everyone reading the release (core/shared.py): it
    reads the range's cost lines of the whole cluster (a release page's Cost card, a plan's
    costs)."""
    key = f"reports:release-cost:{release.pk}:{release.phase}"
    return shared_value(
        key, lambda: _release_cost_rows(release), fresh_s=settings.SWITCHYARD_HOME_CACHE_S
    )


def _release_cost_rows(release) -> list[dict]:
    now = timezone.now()
    end = release.finished_at or now
    periods = [("During the release", release.created_at, end)]
    if release.phase == "SUCCEEDED" and release.finished_at:
        periods.append(("Since promotion", release.finished_at, now))
    rows = []
    for label, since, until in periods:
        costs = version_costs(
            cluster_id=release.cluster_id, model=release.model.name, since=since, until=until
        )
        rows.append(
            {
                "label": label,
                "baseline": costs.get(str(release.baseline.version)),
                "candidate": costs.get(str(release.candidate.version)),
            }
        )
    # JSON for the shared cache: Decimals as their text, rendered alike.
    return json.loads(json.dumps(rows, cls=DjangoJSONEncoder))
