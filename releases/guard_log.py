"""The fast guard's per-tick samples, so the cockpit can draw the evidence a guard acted on.

Between ticks the samples live in the cache (Redis): a tick that changes nothing else still
writes nothing to the database. Each tick that saves the release stores them on its row
(`Release.guard_samples`), the one that trips the guard included; the cache's copy goes
when the release ends. The functions above the cache's are pure.

Each sample is what the guard judged at one tick: the candidate's requests and errors since
it first took traffic in this release (they only grow), the error rate, its lower confidence
bound and the limit (the allowed error rate) that bound must exceed to trip.
"""

from __future__ import annotations

from django.core.cache import cache

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


def _key(release_id: int) -> str:
    return f"releases:guard-samples:{release_id}"


def guard_record(release, guard: Guard, *, at: float) -> list[dict]:
    """This tick's samples of a release (the cache's, else its row's, plus this one)."""
    samples = cache.get(_key(release.pk)) or release.guard_samples or []
    grown = samples_appended(samples, guard, at=at)
    if grown is not samples:
        cache.set(_key(release.pk), grown, timeout=24 * 3600)
    return grown


def guard_forget(release_id: int) -> None:
    """Drop the cache's copy once the release has ended: its row holds the samples."""
    cache.delete(_key(release_id))


def guard_samples_of(release) -> list[dict]:
    """What the cockpit draws: the latest samples while the release runs, its row's after."""
    if release.is_active:
        return cache.get(_key(release.pk)) or release.guard_samples or []
    return release.guard_samples or []
