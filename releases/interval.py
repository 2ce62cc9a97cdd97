"""The analysis interval's bookkeeping, pure: no database, no network, no clock.

A release judges its candidate over intervals. The one being watched is stored on the
release (`Release.interval`) as {"marker": [step_index, weight], "start": reading}, where a
reading is {"at": epoch seconds, "log_offset": the router log's size, "nodes": {node:
{version: counters}}}, and "carried" holds the fast guard's counts of the intervals before
it (the guard judges the release's whole traffic, not one interval). An interval belongs to
one step at one weight (its marker): when the step or the weight moves, a new one opens.
Each tick watches the open interval (the fast guard reads it with what it carried); once it
has lasted the analysis interval while PROGRESSING (or SHADOWING: the candidate judged on
the router's mirrored copies of requests) it is judged and the next one opens.

Counter deltas follow the one restart rule (`integrations.triton.metrics.counter_deltas`):
a node whose counters went down since the start (Triton or the model restarted), or whose
series was not in the start reading, adds nothing, and `rebased` moves that node's start to
its new reading so the rest of the interval counts from there.
"""

from typing import Literal

from integrations.triton.metrics import counter_deltas

# own_*: the control plane's own requests among Triton's (releases/observe.py).
# output_tokens: a generative model's, where it counts them (integrations/triton/metrics.py).
COUNTERS = (
    "success", "failure", "request_us", "queue_us", "own_success", "own_failure",
    "output_tokens",
)  # fmt: skip

Step = Literal["open", "watch", "judge"]


def marker(step_index: int, weight: float, *, shadow: bool = False) -> list:
    """What an interval belongs to: one step at one weight, or the shadow."""
    return [step_index, weight, "shadow"] if shadow else [step_index, weight]


def reading(*, at: float, log_offset: int, nodes: dict[str, dict[str, dict]]) -> dict:
    """Counters of the live nodes (node -> version -> counters) and where the log was."""
    return {"at": at, "log_offset": log_offset, "nodes": nodes}


def opened(
    mark: list, start: dict, carried: dict | None = None, *, routed_at: float | None = None
) -> dict:
    """A new interval of `mark`, starting at the reading `start`, with the fast guard's
    counts of the intervals before it (`carried`, see `totals`). `routed_at`: when the
    router began serving the interval's weight, where that came after `start` (the tick
    that moved it read the nodes first); latencies are compared from then only."""
    out = {"marker": mark, "start": start, "carried": carried or {}}
    if routed_at is not None and routed_at > start.get("at", 0.0):
        out["routed_at"] = routed_at
    return out


def latency_since(interval: dict) -> float:
    """From when an interval's per-request latencies are compared: both versions served
    at the interval's weight. Before it the router still split by the previous weight, so a
    version's share of that stretch would be compared with the other's under the new one
    (at 100 % the baseline's last requests before the switch against the candidate's
    after it, the router's reload among them)."""
    return max(float(interval["start"]["at"]), float(interval.get("routed_at") or 0.0))


def totals(interval: dict | None, seen: dict[str, tuple[int, int]]) -> dict[str, list[int]]:
    """The fast guard's evidence: per role ("candidate", "baseline") [requests, errors] of
    the release so far, the intervals before this one (their counts carried from interval
    to interval) plus `seen`, this one's counts so far."""
    carried = (interval or {}).get("carried") or {}
    out = {}
    for role in ("candidate", "baseline"):
        before = carried.get(role) or [0, 0]
        now = seen.get(role) or (0, 0)
        out[role] = [int(before[0]) + int(now[0]), int(before[1]) + int(now[1])]
    return out


def next_step(
    interval: dict | None, *, mark: list, now: float, seconds: float, judging: bool
) -> Step:
    """What this tick does with the stored interval: "open" a new one (none yet, or the step
    or weight moved), "judge" it (it has lasted `seconds` and verdicts are due: `judging`),
    or "watch" it (count it, guard on it, judge later)."""
    interval = interval or {}
    if interval.get("marker") != mark or not interval.get("start"):
        return "open"
    if judging and now - interval["start"]["at"] >= seconds:
        return "judge"
    return "watch"


def _start_reading(start: dict, node: str, version: str) -> dict[str, float] | None:
    return start.get("nodes", {}).get(node, {}).get(version)


def delta(start: dict, nodes: dict[str, dict[str, dict]], version: str) -> dict[str, float]:
    """Counters of `version` grown since `start`, summed over the nodes the restart rule
    allows (`nodes`: the live nodes' counters now)."""
    total = dict.fromkeys(COUNTERS, 0.0)
    for node, versions in nodes.items():
        now = versions.get(version)
        deltas = None if now is None else counter_deltas(_start_reading(start, node, version), now)
        for key in COUNTERS:
            total[key] += (deltas or {}).get(key, 0.0)
    return total


def client_counts(d: dict[str, float]) -> tuple[float, float]:
    """(successes, failures) of a `delta` less the control plane's own, clamped at 0."""
    return (
        max(0.0, d["success"] - d["own_success"]),
        max(0.0, d["failure"] - d["own_failure"]),
    )


def rebased(start: dict, nodes: dict[str, dict[str, dict]]) -> dict:
    """`start` with each (node, version) the restart rule dropped moved to its reading in
    `nodes`, so the rest of the interval counts from there; the same dict when none was."""
    moved = {name: dict(versions) for name, versions in start.get("nodes", {}).items()}
    changed = False
    for name, versions in nodes.items():
        for version, now in versions.items():
            if counter_deltas(_start_reading(start, name, version), now) is None:
                moved.setdefault(name, {})[version] = now
                changed = True
    return {**start, "nodes": moved} if changed else start
