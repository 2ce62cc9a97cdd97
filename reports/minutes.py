"""Cost lines computed from the per-minute telemetry rollups (reads only).

Each minute is charged the node's price in effect when it ended (deployments/prices.py),
so rebuilding a closed hour charges it what it was charged before a later price change.

The hourly rollup task stores these lines per hour; reports compute the minutes not yet
rolled up the same way, on the fly. A node is paid for from its first rollup onwards; a
minute of it without any rollup is unknown (it was down or not scraped). A removed node
is paid for only in the minutes it has rollups.

A temporary model (a smoke test's or a benchmark's) is charged to its real model and
version under its cost kind (deployments.temporary); idle and unknown lines have no kind.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import OuterRef, Subquery

from deployments.models import TritonCluster, TritonNode
from deployments.prices import (
    CLUSTER_PRICE_FIELDS,
    EPOCH,
    NODE_PRICE_FIELDS,
    price_changes_before,
)
from deployments.temporary import charged_to
from models_registry.models import ModelVersion
from reports.costing import NodePrice, Usage, node_price, split_minute
from telemetry.models import Rollup

MINUTE = timedelta(minutes=1)

# (cluster id, node name, bucket start, kind, model, version, cost kind)
LineKey = tuple[int, str, datetime, str, str, str, str]


@dataclass
class Line:
    """Totals of one cost line (see reports.models.CostRollup for the meaning)."""

    cost_ticks: int = 0
    idle_share_ticks: int = 0
    requests: int = 0
    successes: int = 0
    compute_us: float = 0.0
    minutes: int = 0
    output_tokens: int = 0  # a generative model's output tokens (its own counter)

    def add(self, other: Line) -> None:
        self.cost_ticks += other.cost_ticks
        self.idle_share_ticks += other.idle_share_ticks
        self.requests += other.requests
        self.successes += other.successes
        self.compute_us += other.compute_us
        self.minutes += other.minutes
        self.output_tokens += other.output_tokens


@dataclass(frozen=True)
class PriceTimeline:
    """A node's price over time: `prices[i]` from `starts[i]` on (sorted)."""

    starts: list[datetime]
    prices: list[NodePrice]

    def at(self, minute: datetime) -> NodePrice:
        """The price of the minute starting at `minute`: the last one set before it ended
        (the earliest known price for a minute before any)."""
        return self.prices[max(0, bisect_left(self.starts, minute + MINUTE) - 1)]


def _in_effect(changes: list[tuple[datetime, dict]], at: datetime) -> dict | None:
    """The values of the last change at or before `at` (None before the first)."""
    found = None
    for start, values in changes:
        if start > at:
            break
        found = values
    return found


def _timeline(cluster: list[tuple[datetime, dict]], node: list[tuple[datetime, dict]]):
    starts = sorted({at for at, _ in cluster} | {at for at, _ in node})
    prices = []
    for at in starts:
        own = _in_effect(node, at) or {}  # before the node's first price: the cluster's
        cluster_hourly = (_in_effect(cluster, at) or cluster[0][1])["node_hourly_cost"]
        prices.append(
            node_price(
                cluster_hourly=cluster_hourly,
                hourly=own.get("hourly_cost"),
                gpu_hourly=own.get("gpu_hourly_cost"),
                gpu_count=own.get("gpu_count"),
                slots=own.get("execution_slots"),
            )
        )
    return PriceTimeline(starts, prices)


def node_prices(until: datetime) -> dict[tuple[int, str], PriceTimeline]:
    """Every node's price over time (removed nodes' too) from the price history; clusters'
    prices under node name '' (removed nodes priced before there was a history). A node or
    cluster without any history (written outside the services) has its current price."""
    clusters: dict[int, list] = defaultdict(list)
    nodes: dict[tuple[int, str], list] = defaultdict(list)
    for change in price_changes_before(until=until):
        values = {f: getattr(change, f) for f in (*NODE_PRICE_FIELDS, *CLUSTER_PRICE_FIELDS)}
        where = nodes[(change.cluster_id, change.node_name)] if change.node_name else None
        (where if where is not None else clusters[change.cluster_id]).append(
            (change.effective_at, values)
        )
    for c in TritonCluster.objects.all():
        clusters.setdefault(c.id, [(EPOCH, {"node_hourly_cost": c.node_hourly_cost})])
    for n in TritonNode.objects.all():
        nodes.setdefault(
            (n.cluster_id, n.name), [(EPOCH, {f: getattr(n, f) for f in NODE_PRICE_FIELDS})]
        )
    timelines = {(cid, ""): _timeline(rows, []) for cid, rows in clusters.items()}
    for (cid, name), rows in nodes.items():
        if cid in clusters:
            timelines[(cid, name)] = _timeline(clusters[cid], rows)
    return timelines


def first_seen(until: datetime) -> dict[tuple[int, str], datetime]:
    """The first rollup minute of every current node (before `until`).

    One query: per node a lookup on the rollup table's unique index (a subquery), cheap
    however long the table is and however many nodes there are.
    """
    first = (
        Rollup.objects.filter(
            cluster_id=OuterRef("cluster_id"),
            node_name=OuterRef("name"),
            model_name="",
            version="",
            minute__lt=until,
        )
        .order_by("minute")
        .values("minute")[:1]
    )
    nodes = TritonNode.objects.annotate(first=Subquery(first)).values_list(
        "cluster_id", "name", "first"
    )
    return {(cluster_id, name): at for cluster_id, name, at in nodes if at is not None}


def _usage(since: datetime, until: datetime) -> dict[tuple[int, str, datetime], list[Usage]]:
    """Per node-minute, one Usage per (model, version, cost kind) charged: the temporary
    models of one version in one minute (two smoke tests) are summed into one."""
    per_minute: dict[tuple[int, str, datetime], dict[tuple, Usage]] = defaultdict(dict)
    ensembles = _ensembles()
    rows = Rollup.objects.filter(minute__gte=since, minute__lt=until).values_list(
        "cluster_id",
        "node_name",
        "minute",
        "model_name",
        "version",
        "compute_us",
        "requests",
        "successes",
        "output_tokens",
    )
    for cluster_id, node, minute, model, version, *counts in rows.iterator(chunk_size=20000):
        usage = per_minute[(cluster_id, node, minute)]
        if model:
            to = charged_to(model, version)
            key = (to.model, to.version, to.cost_kind)
            compute, requests, successes, tokens = counts
            if (to.model, to.version) in ensembles:
                compute = 0  # its steps' compute, counted under theirs
            if key in usage:
                was = usage[key]
                compute, requests = compute + was.compute_us, requests + was.requests
                successes, tokens = successes + was.successes, tokens + was.output_tokens
            usage[key] = Usage(*key[:2], compute, requests, successes, to.cost_kind, tokens)
    return {where: list(usage.values()) for where, usage in per_minute.items()}


def _ensembles() -> set[tuple[str, str]]:
    """(model, version) of every registered ensemble. Triton reports an ensemble's compute
    time as the sum of its steps' for the requests that came through it (measured on 2.51:
    docs/TRITON.md), and its steps report the same time again: charged to both, the
    pipeline's time would count twice. An ensemble's own cost is nil; what its traffic
    costs is its steps' share (`reports.selectors.graph_cost`)."""
    rows = ModelVersion.objects.filter(config_json__platform="ensemble")
    return {(name, str(version)) for name, version in rows.values_list("model__name", "version")}


def _minutes(since: datetime, until: datetime):
    at = since
    while at < until:
        yield at
        at += MINUTE


def cost_lines(
    since: datetime, until: datetime, *, bucket: timedelta | None = None
) -> dict[LineKey, Line]:
    """Cost lines of whole minutes in [since, until), per bucket (one bucket when None)."""
    prices = node_prices(until)
    firsts = first_seen(until)
    usage = _usage(since, until)
    seen: dict[tuple[int, str], set[datetime]] = defaultdict(set)
    for cluster_id, node, minute in usage:
        seen[(cluster_id, node)].add(minute)
    lines: dict[LineKey, Line] = defaultdict(Line)
    for cluster_id, node in set(seen) | set(firsts):
        price = prices.get((cluster_id, node)) or prices.get((cluster_id, ""))
        if price is None:
            continue
        start = max(since, firsts.get((cluster_id, node), until))
        for minute in sorted(seen[(cluster_id, node)] | set(_minutes(start, until))):
            at = since + (minute - since) // bucket * bucket if bucket else since
            _add_minute(
                lines,
                (cluster_id, node, at),
                price.at(minute),
                usage.get((cluster_id, node, minute)),
            )
    return dict(lines)


def _add_minute(lines, where: tuple[int, str, datetime], price: NodePrice, usage) -> None:
    split = split_minute(price, usage)
    if usage is None:
        lines[(*where, "unknown", "", "", "")].add(Line(cost_ticks=split.unknown, minutes=1))
        return
    lines[(*where, "idle", "", "", "")].add(Line(cost_ticks=split.idle, minutes=1))
    for u in usage:
        key = u.key
        lines[(*where, "model", *key)].add(
            Line(
                cost_ticks=split.allocated.get(key, 0),
                idle_share_ticks=split.idle_share.get(key, 0),
                requests=u.requests,
                successes=u.successes,
                compute_us=u.compute_us,
                minutes=1,
                output_tokens=u.output_tokens,
            )
        )
