"""Pure parts: percentiles, verdict wording, importer errors (no database, no Triton)."""

import pytest

from benchmarks.analysis import percentile, stats_delta
from benchmarks.importers import BenchmarkImportError, parse_perf_analyzer
from benchmarks.verdict import judge


def _level(concurrency, p99, rps, requests=100, errors=0):
    return {
        "concurrency": concurrency,
        "p99_ms": p99,
        "throughput_rps": rps,
        "requests": requests,
        "errors": errors,
    }


def test_percentile_interpolates_like_numpy():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 99) == 5.0 and percentile([], 99) is None


def test_verdict_names_each_failed_check_in_words():
    levels = [_level(1, 10.0, 90.0), _level(16, 52.1, 180.0, errors=1)]
    baseline = {"label": "production v2", "levels": [_level(16, 30.0, 200.0)]}
    verdict = judge(
        levels, sla={"p99_latency_ms": 25.0, "min_throughput_rps": 200.0}, baseline=baseline
    )
    assert verdict["passed"] is False
    assert verdict["reasons"] == [
        "p99 52.1 ms > SLA 25.0 ms at concurrency 16",
        "max throughput 180 req/s < SLA 200 req/s (at concurrency 16)",
        "1 of 200 requests failed (success 99.50% < 100%)",
        "p99 52.1 ms > 1.3 × production v2's 30.0 ms (+74%) at concurrency 16",
    ]
    assert verdict["deltas"] == [{"concurrency": 16, "p99_pct": 73.7, "throughput_pct": -10.0}]


def test_stats_delta_counts_the_window_only():
    before = {"inference_stats": {"success": {"count": 5}, "queue": {"count": 5, "ns": 5_000_000}}}
    after = {
        "inference_stats": {
            "success": {"count": 15},
            "queue": {"count": 15, "ns": 25_000_000},
            "fail": {"count": 1},
        }
    }
    delta = stats_delta(before, after, 2.0)
    assert delta["server_requests"] == 11 and delta["server_failures"] == 1
    assert delta["server_queue_ms"] == 2.0 and delta["server_throughput_rps"] == 5.5


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("a,b\n1,2\n", 1, "header lacks"),
        ("Concurrency,Inferences/Second,p99 latency\n", 2, "no rows"),
        ("Concurrency,Inferences/Second,p99 latency\n1,10,100\n0,10,100\n", 3, "at least 1"),
    ],
)
def test_perf_analyzer_errors_name_the_line(text, line, words):
    with pytest.raises(BenchmarkImportError) as refused:
        parse_perf_analyzer(text)
    assert refused.value.line == line and words in refused.value.message
