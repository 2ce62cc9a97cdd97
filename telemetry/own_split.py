"""Client traffic apart from the control plane's own: pure (no ORM, no Redis, no clock).

Triton counts every request. The control plane counts the ones it sends itself (probes,
warm-ups, smoke tests, benchmarks: deployments/own_traffic.py) once they are answered, and
the collector reads those counters just before each scrape. Per interval and series,
the clients' share is Triton's delta minus the own delta:

* An own request is counted a moment after Triton counts it (a benchmark counts its
  requests every 0.25 s), so one may fall in another interval than Triton's: an own count
  Triton's delta cannot hold is first taken off the clients' counts of the series' rows
  still buffered (Triton showed it earlier: `RollupBuffer.take_back`), and what is left is
  carried to the next interval once (Triton shows it later); what the next interval cannot
  hold either (a request Triton never saw, e.g. the node was unreachable) is dropped and
  the row is flagged `split_inexact`.
* A counter reset (Triton restarted between scrapes: `series_deltas`' rule) leaves the
  interval without Triton's delta, so it cannot be split: the own requests are still
  counted in their columns and the row is flagged.
* Counts are clamped at 0 and never guessed. Latency sums are not split (Triton's counters
  hold one sum for all requests): they cover every request of the interval, and averages
  divide them by client + own successes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

# (model, version, origin) -> {"success": n, "failure": n}, as own_traffic.parse answers.
Counts = dict[tuple[str, str, str], dict[str, float]]
SeriesKey = tuple[str, str]


@dataclass
class Own:
    """One series' own requests in one interval: successes, failures, requests per origin."""

    successes: float = 0.0
    failures: float = 0.0
    by_origin: dict[str, float] = field(default_factory=dict)

    @property
    def requests(self) -> float:
        return self.successes + self.failures

    def add(self, origin: str, success: float, failure: float) -> None:
        self.successes += success
        self.failures += failure
        self.by_origin[origin] = self.by_origin.get(origin, 0.0) + success + failure


def own_deltas(before: Counts | None, now: Counts) -> dict[SeriesKey, Own]:
    """Own requests per (model, version) between two readings of one node's counters.

    No earlier reading: a baseline, nothing yet. A counter below its earlier value started
    again from zero (the hash expired), so its whole value is the delta.
    """
    if before is None:
        return {}
    out: dict[SeriesKey, Own] = {}
    for (model, version, origin), values in now.items():
        old = before.get((model, version, origin), {})
        grown = []
        for outcome in ("success", "failure"):
            value, was = values.get(outcome, 0.0), old.get(outcome, 0.0)
            grown.append(value - was if value >= was else value)
        if grown[0] or grown[1]:
            out.setdefault((model, version), Own()).add(origin, *grown)
    return out


@dataclass
class Split:
    """The clients' counts of one interval, the own ones apart, and what to carry."""

    requests: float = 0.0
    successes: float = 0.0
    failures: float = 0.0
    own: Own = field(default_factory=Own)
    is_inexact: bool = False
    carry: Own = field(default_factory=Own)


def _one(triton: float, carried: float, own: float) -> tuple[float, float, bool]:
    """(client count, own count to carry, carried count dropped?) of one counter."""
    absorbed = min(carried, triton)
    left = triton - absorbed
    return max(0.0, left - own), max(0.0, own - left), carried > absorbed


def split_interval(
    triton_successes: float | None, triton_failures: float | None, own: Own, carried: Own
) -> Split:
    """Triton's successes and failures of one interval (None: reset, no delta) less the
    own requests of the interval and those carried from the one before."""
    if triton_successes is None or triton_failures is None:
        return Split(own=own, is_inexact=own.requests > 0 or carried.requests > 0)
    successes, carry_s, lost_s = _one(triton_successes, carried.successes, own.successes)
    failures, carry_f, lost_f = _one(triton_failures, carried.failures, own.failures)
    carry = replace(Own(), successes=carry_s, failures=carry_f)
    return Split(
        requests=successes + failures,
        successes=successes,
        failures=failures,
        own=own,
        is_inexact=lost_s or lost_f,
        carry=carry,
    )
