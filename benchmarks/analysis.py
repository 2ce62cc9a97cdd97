"""Pure numbers of a benchmark: percentiles, per-level summaries, server-side deltas, verdicts.

No ORM, network or clock. A level result is a plain dict (stored as JSON):
concurrency, requests, errors, duration_s, throughput_rps, p50/p90/p95/p99_ms, client_avg_ms,
server_requests, server_failures, server_queue_ms, server_compute_ms, server_throughput_rps.
Imported levels may lack the client counts (None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

PERCENTILES = (50, 90, 95, 99)
STAT_PHASES = ("queue", "compute_input", "compute_infer", "compute_output")


def percentile(sorted_values: Sequence[float], pct: float) -> float | None:
    """The pct-th percentile by linear interpolation (numpy's default); None when empty."""
    if not sorted_values:
        return None
    rank = (len(sorted_values) - 1) * pct / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    weight = rank - low
    return sorted_values[low] * (1 - weight) + sorted_values[high] * weight


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def level_summary(
    *, concurrency: int, latencies_ms: list[float], errors: int, elapsed_s: float
) -> dict:
    """Client-side numbers of one level; errors count as requests but not in the latencies."""
    values = sorted(latencies_ms)
    requests = len(values) + errors
    summary = {
        "concurrency": concurrency,
        "requests": requests,
        "errors": errors,
        "duration_s": _round(elapsed_s),
        "throughput_rps": _round(requests / elapsed_s if elapsed_s > 0 else 0.0),
        "client_avg_ms": _round(sum(values) / len(values)) if values else None,
    }
    for pct in PERCENTILES:
        summary[f"p{pct}_ms"] = _round(percentile(values, pct))
    return summary


def stream_summary(
    *,
    first_ms: list[float],
    inter_ms: list[float],
    streams: int,
    events: int,
    elapsed_s: float,
) -> dict:
    """A streaming level's figures: p50/p95 time to the first event (of the streams that
    sent one), p95 mean time between events after the first and its rate (1000 / it: the
    5th percentile of a stream's tokens a second), events (tokens, for a model streaming one
    a response) per stream and per second over the level."""
    first, inter = sorted(first_ms), sorted(inter_ms)
    slowest = percentile(inter, 95)
    return {
        "streams": streams,
        "first_token_p50_ms": _round(percentile(first, 50)),
        "first_token_p95_ms": _round(percentile(first, 95)),
        "inter_token_p95_ms": _round(slowest),
        "tokens_per_s_p5": _round(1000.0 / slowest) if slowest else None,
        "tokens_per_stream": _round(events / streams) if streams else None,
        "tokens_per_s": _round(events / elapsed_s) if elapsed_s > 0 else None,
        "tokens_source": "events: one response a token",
    }


def stats_delta(before: dict | None, after: dict | None, elapsed_s: float) -> dict:
    """Server-side numbers over a window from two /stats rows of one model version."""
    if not after:
        return {}
    before = before or {}

    def counter(row: dict, phase: str, key: str) -> int:
        return int(row.get("inference_stats", {}).get(phase, {}).get(key, 0))

    success = counter(after, "success", "count") - counter(before, "success", "count")
    failures = counter(after, "fail", "count") - counter(before, "fail", "count")
    delta = {
        "server_requests": success + failures,
        "server_failures": failures,
        "server_throughput_rps": _round((success + failures) / elapsed_s if elapsed_s else 0.0),
    }
    for phase in STAT_PHASES:
        count = counter(after, phase, "count") - counter(before, phase, "count")
        ns = counter(after, phase, "ns") - counter(before, phase, "ns")
        delta[f"server_{phase}_ms"] = _round(ns / count / 1e6) if count > 0 else None
    delta["server_queue_ms"] = delta.pop("server_queue_ms")
    delta["server_compute_ms"] = delta.pop("server_compute_infer_ms")
    return delta
