"""The verdict on a benchmark: against the model's SLA and the production version's benchmark.

Pure: levels and SLA in, {"passed", "reasons", "checks", "deltas"} out. `reasons` holds the
failed checks in words; `checks` holds every check with `ok` and its text.
"""

from __future__ import annotations

from collections.abc import Sequence


def _fmt(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _pct(new: float, old: float) -> float | None:
    return round((new - old) / old * 100.0, 1) if old else None


def _check(ok: bool, text: str) -> dict:
    return {"ok": ok, "text": text}


def failed_run(reason: str) -> dict:
    """The verdict of a run that could not finish: failed, for `reason` (what `error` says)."""
    return {"passed": False, "reasons": [reason], "checks": [_check(False, reason)]}


def _sla_checks(levels: Sequence[dict], sla: dict) -> list[dict]:
    checks = []
    top = max(levels, key=lambda level: level["concurrency"])
    limit = sla.get("p99_latency_ms")
    if limit is not None and top.get("p99_ms") is not None:
        ok = top["p99_ms"] <= limit
        sign = "≤" if ok else ">"
        checks.append(
            _check(
                ok,
                f"p99 {_fmt(top['p99_ms'])} ms {sign} SLA {_fmt(limit)} ms "
                f"at concurrency {top['concurrency']}",
            )
        )
    checks += _stream_checks(top, sla)
    floor = sla.get("min_throughput_rps")
    if floor is not None:
        best = max(levels, key=lambda level: level.get("throughput_rps") or 0)
        rate = best.get("throughput_rps") or 0.0
        ok = rate >= floor
        checks.append(
            _check(
                ok,
                f"max throughput {_fmt(rate)} req/s {'≥' if ok else '<'} SLA {_fmt(floor)} req/s "
                f"(at concurrency {best['concurrency']})",
            )
        )
    return checks


# A streaming level's figures against a generative SLA: (level key, SLA key, words, unit,
# True when the figure must stay at or below the SLA).
_STREAM_SLA = (
    ("first_token_p95_ms", "p95_first_token_ms", "p95 first token", "ms", True),
    ("inter_token_p95_ms", "p95_inter_token_ms", "p95 between tokens", "ms", True),
    ("tokens_per_s_p5", "min_tokens_per_s", "p5 tokens/s a stream", "", False),
)


def _stream_checks(top: dict, sla: dict) -> list[dict]:
    """A streaming model's figures at the top concurrency against its generative SLA."""
    checks = []
    for key, sla_key, words, unit, at_most in _STREAM_SLA:
        value, limit = top.get(key), sla.get(sla_key)
        if value is None or limit is None:
            continue
        ok = value <= limit if at_most else value >= limit
        sign = ("≤" if ok else ">") if at_most else ("≥" if ok else "<")
        unit = f" {unit}" if unit else ""
        checks.append(
            _check(
                ok,
                f"{words} {_fmt(value)}{unit} {sign} SLA {_fmt(limit)}{unit} at concurrency "
                f"{top['concurrency']}",
            )
        )
    return checks


def _error_check(levels: Sequence[dict], sla: dict) -> list[dict]:
    counted = [lv for lv in levels if lv.get("requests") is not None]
    requests = sum(lv["requests"] for lv in counted)
    errors = sum(lv.get("errors") or 0 for lv in counted)
    if not requests:
        return []
    rate = (requests - errors) / requests * 100.0
    floor = sla.get("min_success_rate")
    floor = 100.0 if floor is None else floor  # without an SLA, any failed request fails
    ok = rate >= floor
    text = f"{errors} of {requests} requests failed (success {rate:.2f}%"
    text += f" {'≥' if ok else '<'} {floor:g}%)"
    return [_check(ok, text)]


def _baseline(levels: Sequence[dict], baseline: dict, tolerance: float) -> tuple[list, list]:
    label = baseline["label"]
    theirs = {lv["concurrency"]: lv for lv in baseline["levels"]}
    checks, deltas = [], []
    for level in levels:
        other = theirs.get(level["concurrency"])
        if other is None or level.get("p99_ms") is None or not other.get("p99_ms"):
            continue
        p99_pct = _pct(level["p99_ms"], other["p99_ms"])
        rate_pct = _pct(level.get("throughput_rps") or 0, other.get("throughput_rps") or 0)
        deltas.append(
            {"concurrency": level["concurrency"], "p99_pct": p99_pct, "throughput_pct": rate_pct}
        )
        limit = tolerance * other["p99_ms"]
        ok = level["p99_ms"] <= limit
        checks.append(
            _check(
                ok,
                f"p99 {_fmt(level['p99_ms'])} ms {'≤' if ok else '>'} {tolerance:g} × {label}'s "
                f"{_fmt(other['p99_ms'])} ms ({p99_pct:+.0f}%) at concurrency "
                f"{level['concurrency']}",
            )
        )
    return checks, deltas


def judge(
    levels: Sequence[dict],
    *,
    sla: dict,
    baseline: dict | None = None,
    tolerance: float = 1.3,
) -> dict:
    """Pass only when every check holds; `baseline` is {"label", "levels"} of production's run."""
    measured = [lv for lv in levels if lv.get("p99_ms") is not None]
    if not measured:
        reason = "no level produced a latency (every request failed or none was sent)"
        return {"passed": False, "reasons": [reason], "checks": [_check(False, reason)]}
    checks = _sla_checks(measured, sla) + _error_check(levels, sla)
    deltas: list[dict] = []
    if baseline:
        more, deltas = _baseline(measured, baseline, tolerance)
        checks += more
    return {
        "passed": all(c["ok"] for c in checks),
        "reasons": [c["text"] for c in checks if not c["ok"]],
        "checks": checks,
        "deltas": deltas,
        "baseline": {"label": baseline["label"], "run_id": baseline.get("run_id")}
        if baseline
        else None,
    }
