"""The fast guard's per-tick samples, kept on the release so the cockpit can draw the
evidence a guard acted on (pure: no database, no I/O).

Each sample is what the guard judged at one tick: the candidate's requests and errors since
the analysis interval started (so they grow within an interval and restart with the next),
the error rate, its lower confidence bound and the limit that bound must exceed to trip.
"""

from __future__ import annotations

from releases.analysis import Guard

# 1 s ticks: about ten minutes of the guard's view.
SAMPLES_KEPT = 600


def guard_sample(guard: Guard, *, at: float) -> dict:
    """One tick's sample, rates in percent."""

    def pct(value: float | None) -> float | None:
        return None if value is None else round(100 * value, 3)

    return {
        "at": round(at, 3),
        "requests": guard.requests,
        "errors": guard.errors,
        "error_pct": pct(guard.error_rate),
        "lower_pct": pct(guard.lower_bound),
        "limit_pct": pct(guard.limit),
        "tripped": guard.tripped,
    }


def samples_appended(samples: list[dict], guard: Guard, *, at: float) -> list[dict]:
    """`samples` with this tick's sample added when it says something new (more requests
    seen, or tripped), the oldest dropped beyond SAMPLES_KEPT; `samples` is not changed."""
    sample = guard_sample(guard, at=at)
    last = samples[-1] if samples else None
    if last is not None and last["requests"] == sample["requests"] and not sample["tripped"]:
        return samples
    return [*samples, sample][-SAMPLES_KEPT:]
