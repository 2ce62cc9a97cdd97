"""Which resolution a chart of a time range is drawn at, pure (no ORM, no clock).

A chart is sent at most about `MAX_POINTS_PER_SERIES` points per series: the finest step of
`STEPS` whose number of buckets over the range stays within that. Minute rollups are the
finest stored resolution (the collector's recent raw points are for the live window only);
coarser steps are sums of whole minutes (rates divided by the minutes that had a row).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_POINTS_PER_SERIES = 2000


@dataclass(frozen=True)
class Step:
    """One resolution: its bucket width in seconds and its short name ("1m", "5m", ...)."""

    seconds: int
    name: str


MINUTE = Step(60, "1m")
STEPS = (MINUTE, Step(300, "5m"), Step(3600, "1h"), Step(86400, "1d"))


def buckets(span_s: float, step: Step) -> int:
    """How many buckets of `step` a range of `span_s` seconds touches at most (its start
    need not fall on a bucket boundary, so one more than the whole ones)."""
    if span_s <= 0:
        return 1
    return math.ceil(span_s / step.seconds) + 1


def step_for(span_s: float, *, max_points: int = MAX_POINTS_PER_SERIES) -> Step:
    """The finest step at which a range of `span_s` seconds fits in `max_points` points per
    series; the coarsest step when none does (a range of more than about five years)."""
    for step in STEPS:
        if buckets(span_s, step) <= max_points:
            return step
    return STEPS[-1]
