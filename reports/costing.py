"""The cost model, pure (no ORM, no clock): what a node-minute costs and who used it.

Money is counted in integer *ticks* of 1/600,000 of the currency unit. Prices carry four
decimals, so a node-minute (hourly price / 60) is always a whole number of ticks; every
split below hands out whole ticks with the largest-remainder rule, so allocated + idle +
unknown equals the node's cost exactly, for any range and any grouping. Reports round to
cents only at the end (`to_cents`), again with largest remainders.

A node-minute's cost goes to the model versions that ran on it in proportion to their
compute time (input + infer + output, as the rollups hold) against the node's capacity,
60 s x execution slots; what capacity was not used is idle. When the versions used more
than the capacity (concurrent instances), the whole minute is shared out by compute time
and nothing is idle. A minute the node was not scraped (no node rollup) is unknown: it is
paid for, but charged to nobody.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import TypeVar

TICKS_PER_UNIT = 600_000
MINUTE_US = 60_000_000

K = TypeVar("K")


@dataclass(frozen=True)
class NodePrice:
    """What one minute of a node costs (ticks) and how many inferences it runs at once."""

    minute_ticks: int
    slots: int


def minute_ticks(hourly: Decimal) -> int:
    """Ticks of one minute at an hourly price (exact: prices have four decimals)."""
    return int((Decimal(hourly) * TICKS_PER_UNIT / 60).to_integral_value(ROUND_HALF_UP))


def node_price(
    *,
    cluster_hourly: Decimal,
    hourly: Decimal | None = None,
    gpu_hourly: Decimal | None = None,
    gpu_count: int | None = None,
    slots: int | None = None,
) -> NodePrice:
    """The node's own price, else per-GPU price x GPUs, else the cluster's; slots default
    to the GPU count on GPU nodes and 1 on CPU nodes."""
    if hourly is not None:
        price = Decimal(hourly)
    elif gpu_hourly is not None and gpu_count:
        price = Decimal(gpu_hourly) * gpu_count
    else:
        price = Decimal(cluster_hourly or 0)
    return NodePrice(minute_ticks(price), max(1, slots or gpu_count or 1))


def largest_remainder(total: int, weights: Mapping[K, int]) -> dict[K, int]:
    """`total` whole units split in proportion to integer weights; the parts sum to total.

    Ties go to the keys first in sorted order, so the split is deterministic.
    """
    weight_sum = sum(weights.values())
    if not weights or weight_sum <= 0:
        return {k: 0 for k in weights}
    parts = {k: total * w // weight_sum for k, w in weights.items()}
    left = total - sum(parts.values())
    order = sorted(weights, key=lambda k: (-(total * weights[k] % weight_sum), repr(k)))
    for k in order[:left]:
        parts[k] += 1
    return parts


@dataclass(frozen=True)
class Usage:
    """One model version on one node in one minute, under one cost kind (serving,
    validation, benchmark: deployments.temporary)."""

    model: str
    version: str
    compute_us: float = 0.0
    requests: int = 0
    successes: int = 0
    cost_kind: str = "serving"
    output_tokens: int = 0  # a generative model's (telemetry.models.Rollup)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.model, self.version, self.cost_kind)


@dataclass
class MinuteCost:
    """One node-minute split: ticks per (model, version, cost kind), idle, unknown, and the idle
    shared equally among the versions loaded that minute (the ghost report's measure)."""

    allocated: dict[tuple[str, str, str], int] = field(default_factory=dict)
    idle: int = 0
    unknown: int = 0
    idle_share: dict[tuple[str, str, str], int] = field(default_factory=dict)


def split_minute(price: NodePrice, usage: list[Usage] | None) -> MinuteCost:
    """Split one node-minute; `usage` None means the node was not scraped (unknown). One
    Usage per key (reports.minutes merges the temporary models of one version)."""
    cost = price.minute_ticks
    if usage is None:
        return MinuteCost(unknown=cost)
    compute = {u.key: max(0, round(u.compute_us)) for u in usage}
    used = sum(compute.values())
    capacity = MINUTE_US * price.slots
    busy = cost if used >= capacity else cost * used // capacity
    allocated = largest_remainder(busy, compute)
    idle = cost - sum(allocated.values())
    idle_share = largest_remainder(idle, {key: 1 for key in compute})
    return MinuteCost(allocated, idle, 0, idle_share)


def to_cents(ticks: Mapping[K, int]) -> dict[K, Decimal]:
    """Each amount in currency with two decimals; they add up to the rounded total."""
    cents_total = int(
        (Decimal(sum(ticks.values())) * 100 / TICKS_PER_UNIT).to_integral_value(ROUND_HALF_UP)
    )
    cents = largest_remainder(cents_total, dict(ticks)) if ticks else {}
    return {k: Decimal(c).scaleb(-2) for k, c in cents.items()}


def ticks_to_money(ticks: int) -> Decimal:
    """Ticks as currency rounded to the cent."""
    return (Decimal(ticks) / TICKS_PER_UNIT).quantize(Decimal("0.01"), ROUND_HALF_UP)


def change_pct(now: int, before: int) -> float | None:
    """Percent change against the previous period; None when there was nothing before."""
    return None if before <= 0 else round((now - before) * 100.0 / before, 1)


def cost_per_1k(ticks: int, successes: int) -> Decimal | None:
    """Cost of a thousand successful requests (or output tokens), to a hundredth of a cent;
    None without any."""
    if successes <= 0:
        return None
    value = Decimal(ticks) * 1000 / TICKS_PER_UNIT / successes
    return value.quantize(Decimal("0.0001"), ROUND_HALF_UP)


def sum_by(rows: Iterable[tuple[K, int]]) -> dict[K, int]:
    """Add integer amounts per key."""
    out: dict[K, int] = {}
    for key, amount in rows:
        out[key] = out.get(key, 0) + amount
    return out
