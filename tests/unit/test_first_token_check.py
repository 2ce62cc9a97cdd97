"""The time-to-first-token check of streaming releases, and how one more check joins an
interval's verdict (pure)."""

import numpy as np

from releases.analysis import (
    Check,
    Verdict,
    first_token_check,
    held_for_streams,
    inter_token_check,
    size_strata,
    token_figures,
    tokens_rate_check,
    van_elteren_greater,
    with_check,
)

rng = np.random.default_rng(3)
STEADY = list(40 + rng.normal(0, 1.5, 60))  # ms: the example's v1
SLOW = list(80 + rng.normal(0, 1.5, 60))  # v2: twice as slow to its first token


def test_twice_as_slow_first_tokens_fail_and_equal_ones_pass():
    slow = first_token_check(SLOW, STEADY, tolerance=1.5, alpha=0.01)
    assert not slow.passed and slow.name == "ttft_p95_ms"
    assert slow.text.startswith("p95 first token 8") and "> 1.5×4" in slow.text
    same = first_token_check(STEADY[:30], STEADY[30:], tolerance=1.5, alpha=0.01)
    assert same.passed and "≤" in same.text


def test_too_few_streams_are_not_judged_and_a_small_shift_within_tolerance_passes():
    assert first_token_check(SLOW[:19], STEADY, tolerance=1.5, alpha=0.01) is None
    nudged = [x + 3 for x in STEADY]  # surely later, but within 1.5x
    assert first_token_check(nudged, STEADY, tolerance=1.5, alpha=0.01).passed


def test_one_more_check_fails_a_passing_interval_and_leaves_an_inconclusive_one():
    failed = Check("ttft_p95_ms", False, 80.0, 60.0, "p95 first token 80 > 1.5×40 ms")
    passed = Verdict("pass", [], "avg 5 ≤ 6")
    assert with_check(passed, failed).result == "fail"
    assert with_check(passed, failed).reason == "p95 first token 80 > 1.5×40 ms"
    ok = Check("ttft_p95_ms", True, 40.0, 60.0, "p95 first token 40 ≤ 1.5×40 ms")
    assert with_check(passed, ok).reason == "avg 5 ≤ 6, p95 first token 40 ≤ 1.5×40 ms"
    thin = Verdict("inconclusive", [], "inconclusive: 3 requests < 10")
    assert with_check(thin, failed) is thin and with_check(passed, None) is passed
    both = with_check(Verdict("fail", [], "errors 5%"), failed)
    assert both.reason == "errors 5%; p95 first token 80 > 1.5×40 ms"


def test_a_passing_interval_with_too_few_streams_a_side_is_held_inconclusive():
    passed = Verdict("pass", [], "success 100 ≥ 99")
    held = held_for_streams(passed, (17, 31), (17, 31))
    assert held.result == "inconclusive"
    assert held.reason == "inconclusive: streams: candidate 17, baseline 31 < 20 a side"
    assert held_for_streams(passed, (20, 20), (22, 20)) is passed  # enough to compare
    failed = Verdict("fail", [], "success 90 < 99")
    assert held_for_streams(failed, (3, 3), (4, 3)) is failed  # a failure stands
    # A mostly-infer model whose clients stream now and then, or one side not streaming
    # (the shadow: the router mirrors infer only), is not held.
    assert held_for_streams(passed, (5, 4), (80, 70)) is passed
    assert held_for_streams(passed, (0, 40), (30, 40)) is passed


def test_a_pace_twice_as_slow_fails_by_the_same_rule():
    from releases.analysis import pace_check

    steady = [10 + x / 10 for x in range(40)]  # ms per KiB
    slow = pace_check([2 * x for x in steady], steady, tolerance=1.5, alpha=0.01)
    assert not slow.passed and slow.name == "pace_p95_ms_per_kib" and "ms/KiB" in slow.text
    assert pace_check(steady, steady, tolerance=1.5, alpha=0.01).passed


def test_cut_streams_are_read_from_nginx_error_lines_per_version_and_time():
    import time

    from integrations.routers.access_log import cut_streams

    def line(at: float, model: str, version: int, what: str = "prematurely closed") -> str:
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(at))
        return (
            f"{stamp} [error] 7#7: *3 upstream {what} connection while reading upstream, "
            f'client: 127.0.0.1, server: , request: "POST /v2/models/{model}/generate_stream '
            f'HTTP/1.1", upstream: "http://127.0.0.1:8000/v2/models/{model}--c{version}'
            f'/versions/{version}/generate_stream", host: "127.0.0.1:18080"'
        )

    now = float(int(time.time()))
    lines = [line(now, "m", 2), line(now + 1, "m", 2), line(now, "m", 1), line(now - 5, "m", 1),
             line(now, "other", 2), line(now, "m", 2, what="timed out (110)"), "junk"]  # fmt: skip
    assert cut_streams(lines, "m", now + 0.5) == {2: 2, 1: 1}  # the second of `since` counts
    assert cut_streams(lines, "m", now + 2) == {}


def test_the_slas_first_token_fails_a_candidate_as_fast_as_its_baseline():
    within = first_token_check(STEADY[:30], STEADY[30:], tolerance=1.5, alpha=0.01, sla_ms=30.0)
    assert not within.passed and within.name == "ttft_sla"
    assert within.text.startswith("p95 first token 4") and within.text.endswith("> SLA 30 ms")
    kept = first_token_check(STEADY[:30], STEADY[30:], tolerance=1.5, alpha=0.01, sla_ms=100.0)
    assert kept.passed and kept.name == "ttft_p95_ms"


# ---------------------------------------------------------------- tokens


def _streams(tokens: int, token_ms: float, event_bytes: int, n: int = 40):
    """(pace ms/KiB, bytes) of `n` streams of `tokens` events of `event_bytes`, one token
    every `token_ms` after the first (as the router logs them), and every stream's size."""
    size = tokens * event_bytes
    rest_ms = (tokens - 1) * token_ms
    jitter = rng.normal(0, 0.02, n)
    paced = [(rest_ms * (1 + j) / (size / 1024.0), size) for j in jitter]
    return paced, [size] * n


def test_token_figures_turn_bytes_and_pace_into_time_between_tokens():
    paced, sizes = _streams(11, 10.0, 70)
    figures = token_figures(paced, sizes, tokens=440, requests=40)  # Triton: 11 a stream
    assert figures.tokens_per_stream == 11
    assert abs(np.median(figures.inter_token_ms) - 10.0) < 0.5
    assert abs(np.median(figures.tokens_per_s) - 100.0) < 5
    # Longer tokens (twice the bytes each) at the same pace: the same time between tokens,
    # though the pace per KiB halves.
    long_paced, long_sizes = _streams(11, 10.0, 140)
    longer = token_figures(long_paced, long_sizes, tokens=440, requests=40)
    assert abs(np.median(longer.inter_token_ms) - 10.0) < 0.5
    assert token_figures(paced, sizes, tokens=0, requests=40) is None  # counts no tokens
    assert token_figures([], [], tokens=10, requests=1) is None


def test_slower_tokens_fail_against_the_baseline_and_the_sla_bounds_them_absolutely():
    base = token_figures(*_streams(11, 10.0, 70), tokens=440, requests=40)
    slow = token_figures(*_streams(11, 20.0, 70), tokens=440, requests=40)
    check = inter_token_check(slow.inter_token_ms, base.inter_token_ms, tolerance=1.5, alpha=0.01)
    assert not check.passed and check.name == "itl_p95_ms" and "p95 inter-token" in check.text
    same = inter_token_check(
        base.inter_token_ms[:20], base.inter_token_ms[20:], tolerance=1.5, alpha=0.01, sla_ms=5
    )
    assert not same.passed and same.name == "itl_sla" and "> SLA 5 ms" in same.text
    assert tokens_rate_check(base.tokens_per_s, 50).passed
    failing = tokens_rate_check(base.tokens_per_s, 200)
    assert not failing.passed and failing.text.startswith("p5 tokens/s 9")
    assert tokens_rate_check(base.tokens_per_s, None) is None
    assert tokens_rate_check(base.tokens_per_s[:19], 50) is None  # too few streams


# ---------------------------------------------------------------- size strata


def _mix(short: int, long: int, seed: int):
    """First-token times of `short` streams of a 100-byte prompt (40 ms) and `long` of a
    4 KiB prompt (120 ms: a longer prompt takes longer to its first token), and the
    prompts' sizes."""
    r = np.random.default_rng(seed)
    values = list(40 + r.normal(0, 1.5, short)) + list(120 + r.normal(0, 3, long))
    return values, [100] * short + [4096] * long


def test_a_candidate_sent_longer_prompts_is_not_read_as_slower_within_size_strata():
    """The same version (the same time per prompt size) sent half long prompts against a
    baseline sent 5 %: pooled, its p95 first token is 3x and surely later; within prompt
    size strata it is neither."""
    base, base_sizes = _mix(95, 5, 1)
    cand, cand_sizes = _mix(50, 50, 2)
    pooled = first_token_check(cand, base, tolerance=1.5, alpha=0.01)
    assert not pooled.passed  # what a judge blind to the mix would do
    strata = first_token_check(
        cand, base, tolerance=1.5, alpha=0.01, sizes=(cand_sizes, base_sizes)
    )
    assert strata.passed and "within 2 size strata" in strata.text, strata.text
    # Slower at every size is still caught within the strata.
    slow = [v * 2 for v in cand]
    caught = first_token_check(
        slow, base, tolerance=1.5, alpha=0.01, sizes=(cand_sizes, base_sizes)
    )
    assert not caught.passed and "2.0" in caught.text and "within 2 size strata" in caught.text


def test_size_strata_fall_back_to_one_pool_when_sizes_say_nothing():
    values = list(range(40))
    assert size_strata(values, values, [10] * 40, [10] * 40) == []  # one size only
    assert size_strata(values, values, [1, 2], [1, 2]) == []  # sizes not per stream
    few = size_strata(values, values, [1] * 38 + [9, 9], [1] * 38 + [9, 9])
    assert few == []  # a stratum of 2 a side: fewer than STRATUM_MIN
    assert van_elteren_greater([([3, 4, 5], [1, 2, 3]), ([9], [8])]) < 0.2
    assert van_elteren_greater([]) is None
