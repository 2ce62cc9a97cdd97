"""The fast guard's per-tick samples (releases/guard_log.py) and what a release shows of its
weight once it ended without its candidate (pure: no database)."""

from releases.analysis import SLA, Metrics, fast_guard
from releases.guard_log import SAMPLES_KEPT, samples_appended
from releases.models import Release

SLA_ = SLA(p99_latency_ms=100, min_success_rate=99.0, max_queue_ms=None)


def test_a_sample_carries_the_counts_rates_and_limit_the_guard_judged():
    guard = fast_guard(Metrics(requests=200, errors=120), SLA_, min_requests=10)
    (sample,) = samples_appended([], guard, at=100.0)
    assert sample["tripped"] and (sample["requests"], sample["errors"]) == (200, 120)
    assert sample["error_pct"] == 60.0
    assert sample["lower_pct"] > sample["limit_pct"] == 1.0


def test_too_few_requests_still_record_the_limit():
    guard = fast_guard(Metrics(requests=3, errors=3), SLA_, min_requests=10)
    (sample,) = samples_appended([], guard, at=1.0)
    assert not sample["tripped"] and sample["limit_pct"] == 1.0 and sample["error_pct"] is None


def test_a_tick_that_saw_no_new_request_adds_nothing_and_old_samples_go():
    guard = fast_guard(Metrics(requests=50, errors=0), SLA_, min_requests=10)
    samples = samples_appended([], guard, at=1.0)
    assert samples_appended(samples, guard, at=2.0) is samples
    many = [{**samples[0], "requests": i} for i in range(SAMPLES_KEPT)]
    grown = samples_appended(many, guard, at=3.0)
    assert len(grown) == SAMPLES_KEPT and grown[-1]["at"] == 3.0 and len(many) == SAMPLES_KEPT


def _release(phase: str, weight: float, step_index: int, router=None) -> Release:
    steps = [{"weight": 20.0, "manual_gate": False}, {"weight": 50.0, "manual_gate": False}]
    return Release(
        phase=phase,
        candidate_weight=weight,
        step_index=step_index,
        steps=steps,
        router_weight=router,
    )


def test_rolled_back_serves_zero_and_keeps_its_peak():
    rolled = _release("ROLLED_BACK", 50.0, 1)
    assert rolled.serving_weight == 0.0 and rolled.peak_weight == 50.0
    rolling = _release("ROLLING_BACK", 20.0, 0, router=20.0)
    assert rolling.serving_weight == 20.0 and rolling.peak_weight == 20.0
    running = _release("PROGRESSING", 50.0, 1)
    assert running.serving_weight == 50.0 and not running.ended_without_candidate
