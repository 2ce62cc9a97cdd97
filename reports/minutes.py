"""Cost lines computed from the per-minute telemetry rollups (reads only).

The hourly rollup task stores these lines per hour; reports compute the minutes not yet
rolled up the same way, on the fly. A node is paid for from its first rollup onwards; a
minute of it without any rollup is unknown (it was down or not scraped). A removed node
is paid for only in the minutes it has rollups.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from deployments.models import TritonCluster, TritonNode
from reports.costing import NodePrice, Usage, node_price, split_minute
from telemetry.models import Rollup

MINUTE = timedelta(minutes=1)

# (cluster id, node name, bucket start, kind, model, version)
LineKey = tuple[int, str, datetime, str, str, str]


@dataclass
class Line:
    """Totals of one cost line (see reports.models.CostRollup for the meaning)."""

    cost_ticks: int = 0
    idle_share_ticks: int = 0
    requests: int = 0
    successes: int = 0
    compute_us: float = 0.0
    minutes: int = 0

    def add(self, other: Line) -> None:
        self.cost_ticks += other.cost_ticks
        self.idle_share_ticks += other.idle_share_ticks
        self.requests += other.requests
        self.successes += other.successes
        self.compute_us += other.compute_us
        self.minutes += other.minutes


def node_prices() -> dict[tuple[int, str], NodePrice]:
    """Price and slots of every node; clusters' prices under node name '' (removed nodes)."""
    prices = {
        (c.id, ""): node_price(cluster_hourly=c.node_hourly_cost)
        for c in TritonCluster.objects.all()
    }
    for n in TritonNode.objects.select_related("cluster"):
        prices[(n.cluster_id, n.name)] = node_price(
            cluster_hourly=n.cluster.node_hourly_cost,
            hourly=n.hourly_cost,
            gpu_hourly=n.gpu_hourly_cost,
            gpu_count=n.gpu_count,
            slots=n.execution_slots,
        )
    return prices


def first_seen(until: datetime) -> dict[tuple[int, str], datetime]:
    """The first rollup minute of every current node (before `until`).

    One lookup per node on the rollup table's unique index: cheap however long it is.
    """
    out = {}
    for cluster_id, name in TritonNode.objects.values_list("cluster_id", "name"):
        first = (
            Rollup.objects.filter(
                cluster_id=cluster_id, node_name=name, model_name="", version="", minute__lt=until
            )
            .order_by("minute")
            .values_list("minute", flat=True)
            .first()
        )
        if first is not None:
            out[(cluster_id, name)] = first
    return out


def _usage(since: datetime, until: datetime) -> dict[tuple[int, str, datetime], list[Usage]]:
    per_minute: dict[tuple[int, str, datetime], list[Usage]] = defaultdict(list)
    rows = Rollup.objects.filter(minute__gte=since, minute__lt=until).values_list(
        "cluster_id",
        "node_name",
        "minute",
        "model_name",
        "version",
        "compute_us",
        "requests",
        "successes",
    )
    for cluster_id, node, minute, model, version, compute, requests, successes in rows.iterator(
        chunk_size=20000
    ):
        usage = per_minute[(cluster_id, node, minute)]
        if model:
            usage.append(Usage(model, version, compute, requests, successes))
    return per_minute


def _minutes(since: datetime, until: datetime):
    at = since
    while at < until:
        yield at
        at += MINUTE


def cost_lines(
    since: datetime, until: datetime, *, bucket: timedelta | None = None
) -> dict[LineKey, Line]:
    """Cost lines of whole minutes in [since, until), per bucket (one bucket when None)."""
    prices = node_prices()
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
            _add_minute(lines, (cluster_id, node, at), price, usage.get((cluster_id, node, minute)))
    return dict(lines)


def _add_minute(lines, where: tuple[int, str, datetime], price: NodePrice, usage) -> None:
    split = split_minute(price, usage)
    if usage is None:
        lines[(*where, "unknown", "", "")].add(Line(cost_ticks=split.unknown, minutes=1))
        return
    lines[(*where, "idle", "", "")].add(Line(cost_ticks=split.idle, minutes=1))
    for u in usage:
        key = (u.model, u.version)
        lines[(*where, "model", *key)].add(
            Line(
                cost_ticks=split.allocated.get(key, 0),
                idle_share_ticks=split.idle_share.get(key, 0),
                requests=u.requests,
                successes=u.successes,
                compute_us=u.compute_us,
                minutes=1,
            )
        )
