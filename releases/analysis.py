"""Judging one analysis interval of a gray release: candidate against baseline and SLA.

Pure: the numbers come in (from telemetry and the router's log), a verdict goes out with one
human-readable line per check. The statistical judge's tests come from scipy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

Result = Literal["pass", "fail", "inconclusive"]


def _stats():
    """scipy.stats, imported on the first judgement: it costs a quarter of a second of CPU
    that every process importing this module (web, workers, commands) would pay at start."""
    from scipy import stats

    return stats


# Points of success a candidate may fall below a worse baseline (the gates and the guard).
SUCCESS_MARGIN_PCT = 0.5


@dataclass(frozen=True)
class Metrics:
    """One version's traffic over an interval; router counts are optional."""

    requests: int  # as Triton counted them
    errors: int = 0
    avg_ms: float | None = None
    p99_ms: float | None = None
    queue_ms: float | None = None
    # Triton counts a python model's error responses as successes and never sees requests it
    # rejects at input validation, so the router's view is taken too and the worse one wins.
    router_requests: int | None = None
    router_errors: int | None = None
    # Where p99_ms comes from: "router" (its log's per-request latencies over the interval)
    # or "triton" (its summary quantiles, server side, over a longer window); "" unknown.
    p99_from: str = ""
    # How many per-request latencies a router p99 rests on (None: not the router's).
    p99_samples: int | None = None

    def worst_counts(self) -> tuple[int, int]:
        """(requests, errors) of the source with the higher error rate (Triton or router)."""
        sources = [(self.requests, self.errors)]
        if self.router_requests is not None:
            sources.append((self.router_requests, self.router_errors or 0))
        seen = [(n, e) for n, e in sources if n > 0]
        if not seen:
            return (max(n for n, _ in sources), 0)
        return max(seen, key=lambda s: (s[1] / s[0], s[0]))

    @property
    def seen(self) -> int:
        """The larger request count of the two sources."""
        return max(self.requests, self.router_requests or 0)

    @property
    def error_rate(self) -> float | None:
        """Errors / requests of the worse source, None without requests."""
        n, e = self.worst_counts()
        return e / n if n else None

    @property
    def success_rate(self) -> float | None:
        """Percent of requests that succeeded (the worse source), None without requests."""
        rate = self.error_rate
        return None if rate is None else 100.0 * (1.0 - rate)


@dataclass(frozen=True)
class SLA:
    p99_latency_ms: float | None = None
    min_success_rate: float | None = None  # percent
    max_queue_ms: float | None = None


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    observed: float | None
    threshold: float | None
    text: str


@dataclass(frozen=True)
class Verdict:
    result: Result
    checks: list[Check] = field(default_factory=list)
    reason: str = ""


@dataclass(frozen=True)
class LatencyJudge:
    """The statistical judge's say on latency: the one-sided p-value that the candidate's
    per-request latencies tend to be larger (Mann-Whitney: the avg check), the bootstrap
    p-value that its p99 is within tolerance of the baseline's (the p99 check; None: the
    Mann-Whitney one decides both), and whether it decides (`decisive`)."""

    p_value: float | None
    decisive: bool
    alpha: float = 0.01
    p99_p_value: float | None = None
    p99_decisive: bool = False

    def _p99_own(self, name: str) -> bool:
        return name == "p99_ms" and self.p99_p_value is not None

    def decides(self, name: str) -> bool:
        """Whether it decides the check of statistic `name` ("avg_ms", "p99_ms")."""
        return self.p99_decisive if self._p99_own(name) else self.decisive

    def p_value_of(self, name: str) -> float | None:
        """The p-value that decides the check of statistic `name`."""
        return self.p99_p_value if self._p99_own(name) else self.p_value


def latency_judge(
    p_value: float | None,
    samples: tuple[int, int],
    *,
    mode: str,
    min_samples: int,
    alpha: float,
    p99_p_value: float | None = None,
) -> LatencyJudge:
    """`mode` "auto": decisive once candidate and baseline each have `min_samples` per-request
    latencies; "on": whenever there is a p-value; "off": never (ratio and margin only). The
    p99 bootstrap decides from P99_MIN_SAMPLES a side, whatever `min_samples` is: its spread
    is its own sample size's."""
    decisive = p_value is not None and (
        mode == "on" or (mode == "auto" and min(samples) >= min_samples)
    )
    p99_decisive = p99_p_value is not None and (
        mode == "on" or (mode == "auto" and min(samples) >= P99_MIN_SAMPLES)
    )
    return LatencyJudge(p_value, decisive, alpha, p99_p_value, p99_decisive)


# A canary's p99 over fewer latencies than this is left to the ratio and the noise margin.
P99_MIN_SAMPLES = 20


def p99_within_p_value(
    candidate: Sequence[float],
    baseline: Sequence[float],
    tolerance: float,
    *,
    rounds: int = 400,
    cap: int = 2000,
    seed: int = 0,
) -> float | None:
    """How plausible it is that the candidate's p99 is within `tolerance` times the
    baseline's: the share of bootstrap rounds (both sides resampled, fixed `seed`, at most
    `cap` latencies a side) where it is. Small means surely above. Unlike Mann-Whitney, which
    tells a shift of the whole distribution (a few hundredths of a millisecond among
    thousands of requests is "significant"), this asks what the p99 check asks: a 5 % canary's
    p99 rests on its one or two slowest requests, and says so by a wide spread."""
    rng = np.random.default_rng(seed)
    sides = []
    for values in (candidate, baseline):
        values = np.asarray(values, dtype=float)
        if len(values) == 0:
            return None
        if len(values) > cap:
            values = rng.choice(values, size=cap, replace=False)
        draws = rng.choice(values, size=(rounds, len(values)))
        sides.append(np.percentile(draws, 99, axis=1))
    return float(np.mean(sides[0] <= tolerance * sides[1]))


def analyze(
    candidate: Metrics,
    baseline: Metrics | None,
    sla: SLA,
    *,
    min_requests: int,
    latency_tolerance: float,
    success_margin_pct: float = SUCCESS_MARGIN_PCT,
    latency_margin_ms: float | Mapping[str, float] = 0.0,
    judge: LatencyJudge | None = None,
    resolution_ms: float = 0.0,
) -> Verdict:
    """Pass when every applicable check passes; inconclusive below min_requests; else fail.

    Against the baseline, a candidate's latency fails when it exceeds the baseline's by
    `latency_tolerance` times and, with a decisive `judge`, the judge is also sure it is
    slower (p below alpha): a p99 over a few dozen requests moves by more than 1.3x on its
    own. Without a decisive judge (too few per-request samples, no router log) the limit is
    the larger of tolerance times and `latency_margin_ms` more (one figure, or one per
    statistic: {"avg_ms": .., "p99_ms": ..}, e.g. the baseline's measured noise from
    `noise_margins_ms`): at a millisecond or two, ratios measure scheduling noise rather
    than the model. A p99 from the router's log is never failed by less than
    `resolution_ms` (the log's whole milliseconds), decisive judge or not: an A/A release
    was rolled back on "p99 1.578 > 1.3×1.108 (p 0.00051)", half a millisecond apart.
    """
    volume = _at_least("requests", "requests", candidate.seen, min_requests, "")
    if not volume.passed:
        text = f"{candidate.seen} requests < {min_requests}"
        return Verdict("inconclusive", [replace(volume, text=text)], f"inconclusive: {text}")
    base = baseline if baseline is not None and baseline.seen > 0 else None
    checks = [volume, *_success_checks(candidate, base, sla, success_margin_pct)]
    for name in ("avg_ms", "p99_ms"):
        decisive = judge if judge is not None and judge.decides(name) else None
        margin = 0.0 if decisive else _margin_of(latency_margin_ms, name)
        if name == "p99_ms" and candidate.p99_from == "router":
            margin = max(margin, resolution_ms)
        checks += _latency_checks(name, candidate, base, sla, latency_tolerance, margin, decisive)
    if sla.max_queue_ms is not None and candidate.queue_ms is not None:
        checks.append(_at_most("queue_sla", "queue", candidate.queue_ms, sla.max_queue_ms))
    failed = [c for c in checks if not c.passed]
    if failed:
        return Verdict("fail", checks, "; ".join(c.text for c in failed))
    return Verdict("pass", checks, ", ".join(c.text for c in checks[1:]) or volume.text)


def _margin_of(margin: float | Mapping[str, float], name: str) -> float:
    return float(margin.get(name, 0.0)) if isinstance(margin, Mapping) else float(margin)


def noise_margins_ms(
    latencies: Sequence[float], *, min_samples: int = 20, rounds: int = 200, seed: int = 0
) -> dict[str, float] | None:
    """How far the baseline's own avg and p99 move by chance, from its per-request latencies
    (ms): for each statistic, the 95th percentile of a bootstrap (`rounds` resamples, fixed
    `seed`) minus its value; the latency gates' slack when the judge does not decide. None
    below `min_samples` latencies."""
    values = np.asarray(latencies, dtype=float)
    if len(values) < min_samples:
        return None
    draws = np.random.default_rng(seed).choice(values, size=(rounds, len(values)))
    out = {}
    for name, stat in (("avg_ms", np.mean), ("p99_ms", lambda a, **kw: np.percentile(a, 99, **kw))):
        boot = stat(draws, axis=1)
        out[name] = max(0.0, float(np.percentile(boot, 95) - stat(values)))
    return out


def _success_checks(
    candidate: Metrics, baseline: Metrics | None, sla: SLA, margin: float
) -> list[Check]:
    """Success at or above the SLA, and not below the baseline by more than `margin` points."""
    observed = candidate.success_rate
    assert observed is not None  # the volume check saw requests
    checks = []
    if sla.min_success_rate is not None:
        checks.append(_at_least("success_sla", "success", observed, sla.min_success_rate, ""))
    base = baseline.success_rate if baseline is not None else None
    if base is not None:
        label = f"baseline {_n(base)} − {_n(margin)}"
        checks.append(_at_least("success_vs_baseline", "success", observed, base - margin, label))
    return checks


def _latency_checks(
    name: str,
    candidate: Metrics,
    baseline: Metrics | None,
    sla: SLA,
    tolerance: float,
    margin_ms: float = 0.0,
    judge: LatencyJudge | None = None,
) -> list[Check]:
    """avg or p99 at or below the SLA (p99 SLA bounds both) and below the larger of
    baseline × tolerance and baseline + margin_ms; with a decisive `judge`, above that
    limit fails only when the judge is sure the candidate is slower."""
    observed = getattr(candidate, name)
    if observed is None:
        return []
    label = name.removesuffix("_ms")
    checks = []
    if sla.p99_latency_ms is not None:
        checks.append(_at_most(f"{label}_sla", label, observed, sla.p99_latency_ms))
    base = getattr(baseline, name) if baseline is not None else None
    if name == "p99_ms" and base is not None and candidate.p99_from != baseline.p99_from:
        # A p99 from the router's log (client side, this interval) against Triton's own
        # (server side, minutes): not the same quantity. At 100 % the baseline has no routed
        # requests; the SLA check above still holds.
        base = None
    few = _fewest_p99_samples(candidate, baseline) if name == "p99_ms" else None
    if base is not None and base > 0 and few is not None and few < P99_MIN_SAMPLES:
        # The p99 of a dozen requests is their slowest one: one hiccup of a busy machine,
        # not the version. Left to the SLA above and the avg; the check says so.
        text = (
            f"{label} {_n(observed)} vs baseline {_n(base)} not compared: "
            f"{few} < {P99_MIN_SAMPLES} latencies"
        )
        return [*checks, Check(f"{label}_vs_baseline", True, observed, None, text)]
    if base is not None and base > 0:
        limit, shown = base * tolerance, f"{_n(tolerance)}×{_n(base)}"
        if base + margin_ms > limit:
            limit, shown = base + margin_ms, f"{_n(base)} + {_n(margin_ms)} ms"
        check = _at_most(f"{label}_vs_baseline", label, observed, limit, shown)
        p = judge.p_value_of(name) if judge is not None else None
        if p is not None and not check.passed and p >= judge.alpha:
            unsure = f"{check.text} but not surely slower (p {p:.2g} ≥ {judge.alpha:g})"
            check = replace(check, passed=True, text=unsure)
        elif p is not None and not check.passed:
            check = replace(check, text=f"{check.text} (p {p:.2g} < {judge.alpha:g})")
        checks.append(check)
    return checks


def _fewest_p99_samples(candidate: Metrics, baseline: Metrics | None) -> int | None:
    """The smaller count of per-request latencies the two router p99s rest on; None unless
    both are the router's."""
    counts = [m.p99_samples for m in (candidate, baseline) if m is not None]
    if len(counts) < 2 or None in counts:
        return None
    return min(counts)


def _at_least(name: str, label: str, observed: float, threshold: float, shown: str) -> Check:
    ok = observed >= threshold
    text = f"{label} {_n(observed)} {'≥' if ok else '<'} {shown or _n(threshold)}"
    return Check(name, ok, observed, threshold, text)


def _at_most(name: str, label: str, observed: float, threshold: float, shown: str = "") -> Check:
    ok = observed <= threshold
    text = f"{label} {_n(observed)} {'≤' if ok else '>'} {shown or _n(threshold)}"
    return Check(name, ok, observed, threshold, text)


@dataclass(frozen=True)
class Guard:
    tripped: bool
    reason: str
    error_rate: float | None = None
    lower_bound: float | None = None  # one-sided lower confidence bound of the error rate
    limit: float | None = None  # the allowed error rate: the bound must exceed it to trip
    requests: int = 0
    errors: int = 0
    allowance: str = ""  # where the limit comes from, for people

    def __bool__(self) -> bool:
        return self.tripped


def error_allowance(
    sla: SLA,
    baseline: tuple[int, int] | None = None,
    *,
    without_sla: float = 0.05,
    margin_pct: float = SUCCESS_MARGIN_PCT,
    min_requests: int = 10,
) -> tuple[float, str]:
    """The error rate a candidate is allowed and why: 1 - the SLA's min_success_rate
    (`without_sla` when the SLA sets none), or, when a baseline with at least `min_requests`
    (requests, errors) fails more than that, the baseline's rate plus `margin_pct` points."""
    if sla.min_success_rate is not None:
        limit = 1.0 - sla.min_success_rate / 100.0
        why = f"SLA {_n(sla.min_success_rate)}% success"
    else:
        limit, why = without_sla, "no SLA success rate"
    if baseline is not None and baseline[0] >= min_requests:
        worse = baseline[1] / baseline[0] + margin_pct / 100.0
        if worse > limit:
            limit = worse
            why = f"baseline {_n(100 * baseline[1] / baseline[0])}% + {_n(margin_pct)}"
    return min(limit, 1.0), why


def fast_guard(
    candidate: Metrics,
    sla: SLA,
    *,
    baseline: Metrics | None = None,
    min_requests: int = 10,
    min_errors: int = 2,
    error_rate_floor: float = 0.05,
    z: float = 1.645,
) -> Guard:
    """Trip as soon as the candidate's error rate is statistically sure to exceed what it is
    allowed (`error_allowance`: the SLA's, or a worse baseline's plus a margin): the one-sided
    Wilson lower bound (z 1.645: 95 %) of its rate over the requests seen is above the limit.
    Never on fewer than `min_requests` requests or `min_errors` errors: one unlucky error
    among a few requests is no evidence. `error_rate_floor` is the allowance of an SLA
    without a success rate."""
    n, errors = candidate.worst_counts()
    limit, why = error_allowance(
        sla,
        baseline.worst_counts() if baseline is not None else None,
        without_sla=error_rate_floor,
        min_requests=min_requests,
    )
    counts = {"limit": limit, "requests": n, "errors": errors, "allowance": why}
    allowed = f"{_n(100 * limit)}% allowed ({why})"
    if n < min_requests:
        return Guard(False, f"{n} requests < {min_requests}: too few to judge", **counts)
    rate, low = errors / n, wilson_lower_bound(errors, n, z)
    shown = f"{errors}/{n} errors ({_n(100 * rate)}%, lower bound {_n(100 * low)}%)"
    if errors < min_errors:
        why_not = f"{shown}: fewer than {min_errors} errors"
        return Guard(False, why_not, rate, low, **counts)
    if low > limit:
        return Guard(True, f"{shown} > {allowed}", rate, low, **counts)
    return Guard(False, f"{shown} not surely > {allowed}", rate, low, **counts)


def wilson_lower_bound(successes: int, n: int, z: float) -> float:
    """One-sided Wilson score lower bound of a binomial proportion (0 when n is 0)."""
    if n == 0:
        return 0.0
    p, z2 = successes / n, z * z
    centre = p + z2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z2 / n))


@dataclass(frozen=True)
class Judgement:
    latency_p_value: float | None  # one-sided: candidate latencies tend to be larger
    error_p_value: float | None  # one-sided: candidate error rate is higher


def statistical_judge(
    candidate_latencies: Sequence[float],
    baseline_latencies: Sequence[float],
    cand_errors: int,
    cand_n: int,
    base_errors: int,
    base_n: int,
) -> Judgement:
    """One-sided p-values: Mann-Whitney U on latencies, two-proportion z-test on errors."""
    return Judgement(
        mann_whitney_greater(candidate_latencies, baseline_latencies),
        two_proportion_greater(cand_errors, cand_n, base_errors, base_n),
    )


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> float | None:
    """P-value that x tends to exceed y (scipy's Mann-Whitney U: normal approximation with
    tie and continuity correction, fast for the thousands of samples an interval holds)."""
    if len(x) == 0 or len(y) == 0:
        return None
    if np.ptp(np.concatenate([np.asarray(x, float), np.asarray(y, float)])) == 0:
        return 1.0  # all equal: nothing suggests x is larger (scipy would return nan)
    result = _stats().mannwhitneyu(x, y, alternative="greater", method="asymptotic")
    return float(result.pvalue)


def two_proportion_greater(e1: int, n1: int, e2: int, n2: int) -> float | None:
    """P-value that the first error rate is higher than the second (pooled z-test)."""
    if n1 == 0 or n2 == 0:
        return None
    pooled = (e1 + e2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    return float(_stats().norm.sf((e1 / n1 - e2 / n2) / se))


def _n(x: float) -> str:
    """A number for people: up to three decimals, no trailing zeros."""
    return f"{x:.3f}".rstrip("0").rstrip(".")


# Streams a side before time to first token is compared: a p95 over fewer is its slowest few.
TTFT_MIN_SAMPLES = 20


def first_token_check(
    candidate_ms: Sequence[float],
    baseline_ms: Sequence[float],
    *,
    tolerance: float,
    alpha: float,
    margin_ms: float = 1.0,
    sla_ms: float | None = None,
    sizes: tuple[Sequence[float], Sequence[float]] | None = None,
) -> Check | None:
    """A streaming model's time to first token against the baseline's (the router's time to
    each stream's first event, from the streams that did not fail); None below
    TTFT_MIN_SAMPLES streams a side. It fails when the candidate's p95 is above `tolerance`
    times the baseline's (and `margin_ms` more: the router logs whole milliseconds) and a
    one-sided Mann-Whitney test is sure its first tokens come later (p below `alpha`), the
    same two conditions as the latency checks with a decisive judge: a request's whole time
    says little of a stream whose first token is late and whose tokens then flow. With the
    model's SLA `sla_ms` (p95_first_token_ms), a p95 above it fails whatever the baseline's."""
    label = ("ttft_p95_ms", "p95 first token", "ms")
    check = _stream_check(label, candidate_ms, baseline_ms, tolerance, alpha, margin_ms, sizes)
    if check is not None and check.passed and sla_ms is not None and check.observed > sla_ms:
        text = f"p95 first token {_n(check.observed)} > SLA {_n(sla_ms)} ms"
        return Check("ttft_sla", False, check.observed, sla_ms, text)
    return check


def pace_check(
    candidate: Sequence[float],
    baseline: Sequence[float],
    *,
    tolerance: float,
    alpha: float,
    sizes: tuple[Sequence[float], Sequence[float]] | None = None,
) -> Check | None:
    """A streaming model's pace after its first token (ms per KiB of events: the router sees
    bytes, not tokens) against the baseline's, by the same rule as `first_token_check`: a
    candidate whose tokens come twice as slowly fails though its first token is on time."""
    label = ("pace_p95_ms_per_kib", "p95 pace", "ms/KiB")
    return _stream_check(label, candidate, baseline, tolerance, alpha, 0.0, sizes)


@dataclass(frozen=True)
class TokenFigures:
    """A generative version's token figures over an interval, per stream: its tokens per
    request (Triton's count, `vllm:generation_tokens_total`) over its mean stream size (the
    router's bytes) make its tokens per KiB, which turns each stream's size into its tokens
    and its time after the first token (pace x size, the router's) into ms between tokens
    and tokens per second."""

    tokens_per_stream: float
    tokens_per_kib: float
    inter_token_ms: list[float]
    tokens_per_s: list[float]
    sizes: list[int]  # each timed stream's bytes (its output length), in the same order

    SOURCE = (
        "tokens: the model's vllm:generation_tokens_total per request (Triton), spread over "
        "each stream by the router's bytes and timing"
    )


def token_figures(
    paced: Sequence[tuple[float, int]], stream_bytes: Sequence[int], tokens: float, requests: float
) -> TokenFigures | None:
    """`TokenFigures` of one version from its streams' (pace in ms per KiB, bytes) and every
    stream's size; None where it counts no tokens (or had no stream)."""
    if tokens <= 0 or requests <= 0 or not stream_bytes:
        return None
    per_stream = tokens / requests
    mean_kib = float(np.mean(stream_bytes)) / 1024.0
    if mean_kib <= 0:
        return None
    per_kib = per_stream / mean_kib
    between, sizes = [], []
    for pace, size in paced:
        count = size / 1024.0 * per_kib  # this stream's tokens
        if pace > 0 and count > 1.5:  # a gap after the first token to time
            between.append(pace * size / 1024.0 / (count - 1.0))
            sizes.append(size)
    return TokenFigures(per_stream, per_kib, between, [1000.0 / ms for ms in between], sizes)


def inter_token_check(
    candidate_ms: Sequence[float],
    baseline_ms: Sequence[float],
    *,
    tolerance: float,
    alpha: float,
    sla_ms: float | None = None,
    sizes: tuple[Sequence[float], Sequence[float]] | None = None,
) -> Check | None:
    """A generative model's time between tokens after the first (`TokenFigures`) against
    the baseline's, by `first_token_check`'s rule, and against the model's SLA `sla_ms`
    (p95_inter_token_ms) whatever the baseline's; it replaces `pace_check` where both
    versions count their tokens (a candidate with longer tokens streams more bytes each)."""
    label = ("itl_p95_ms", "p95 inter-token", "ms")
    check = _stream_check(label, candidate_ms, baseline_ms, tolerance, alpha, 0.0, sizes)
    if check is not None and check.passed and sla_ms is not None and check.observed > sla_ms:
        text = f"p95 inter-token {_n(check.observed)} > SLA {_n(sla_ms)} ms"
        return Check("itl_sla", False, check.observed, sla_ms, text)
    return check


def tokens_rate_check(candidate: Sequence[float], min_per_s: float | None) -> Check | None:
    """The model's SLA `min_per_s` (min_tokens_per_s): 95 % of the candidate's streams get
    at least that many tokens per second after the first (its 5th percentile); None without
    the SLA or below TTFT_MIN_SAMPLES streams."""
    if min_per_s is None or len(candidate) < TTFT_MIN_SAMPLES:
        return None
    p5 = float(np.percentile(candidate, 5))
    passed = p5 >= min_per_s
    text = f"p5 tokens/s {_n(p5)} {'≥' if passed else '<'} SLA {_n(min_per_s)}"
    return Check("tokens_per_s_sla", passed, p5, min_per_s, text)


def held_for_streams(
    verdict: Verdict, streams: tuple[int, int], routed: tuple[int | None, int | None]
) -> Verdict:
    """A passing verdict made inconclusive where both versions stream but one of them has
    fewer than TTFT_MIN_SAMPLES timed streams (`streams`: the candidate's and the baseline's
    that did not fail; `routed`: their requests through the router): the stream checks
    compared nothing, and a streaming candidate is judged on its streams. A version streams
    when at least half its routed requests were streams, so a mostly-infer model whose
    clients stream now and then is not held. Meant for an interval where both versions
    serve at the step's weight (the tick leaves 100 % and the shadow out): a slow-token
    candidate once passed its 50 % step in CI with too few streams to compare, then its
    100 % step on the SLA alone."""
    if verdict.result != "pass" or min(streams) >= TTFT_MIN_SAMPLES:
        return verdict
    both = all(s > 0 and 2 * s >= (r or 0) for s, r in zip(streams, routed, strict=True))
    if not both:
        return verdict
    text = f"streams: candidate {streams[0]}, baseline {streams[1]} < {TTFT_MIN_SAMPLES} a side"
    return Verdict("inconclusive", verdict.checks, f"inconclusive: {text}")


# Streams are compared within strata of their size where sizes are known (a prompt's bytes
# for the first token, a stream's for the time between tokens): at most this many strata,
# cut at the pooled sizes' quantiles, each with at least STRATUM_MIN streams a side.
STRATA = 3
STRATUM_MIN = 5


def size_strata(
    candidate: Sequence[float],
    baseline: Sequence[float],
    candidate_sizes: Sequence[float],
    baseline_sizes: Sequence[float],
) -> list[tuple[list[float], list[float]]]:
    """(candidate, baseline) values per size stratum, smallest sizes first: up to STRATA
    strata at the pooled sizes' quantiles, fewer where a stratum would hold fewer than
    STRATUM_MIN streams a side; [] when the sizes do not match the values or one stratum
    is all there is (nothing to stratify)."""
    if len(candidate_sizes) != len(candidate) or len(baseline_sizes) != len(baseline):
        return []
    pooled = np.concatenate([np.asarray(candidate_sizes, float), np.asarray(baseline_sizes, float)])
    for count in range(STRATA, 1, -1):
        edges = np.unique(np.quantile(pooled, [i / count for i in range(1, count)]))
        c_at = np.searchsorted(edges, candidate_sizes, side="left")
        b_at = np.searchsorted(edges, baseline_sizes, side="left")
        pairs = [
            ([v for v, s in zip(candidate, c_at, strict=True) if s == k],
             [v for v, s in zip(baseline, b_at, strict=True) if s == k])
            for k in range(len(edges) + 1)
        ]  # fmt: skip
        if len(pairs) > 1 and all(min(len(c), len(b)) >= STRATUM_MIN for c, b in pairs):
            return pairs
    return []


def van_elteren_greater(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> float | None:
    """P-value that the first values tend to exceed the second within strata (van Elteren's
    stratified Wilcoxon-Mann-Whitney: each stratum's U weighted by 1/(n+m+1), normal
    approximation), so a candidate is not judged on a different mix of sizes."""
    total = mean = var = 0.0
    for cand, base in pairs:
        n, m = len(cand), len(base)
        if not n or not m:
            continue
        both = np.concatenate([np.asarray(cand, float), np.asarray(base, float)])
        ranks = _stats().rankdata(both)
        u = float(ranks[:n].sum()) - n * (n + 1) / 2.0
        weight = 1.0 / (n + m + 1)
        total, mean = total + weight * u, mean + weight * n * m / 2.0
        var += weight**2 * n * m * (n + m + 1) / 12.0
    if var <= 0:
        return None
    return float(_stats().norm.sf((total - mean) / math.sqrt(var)))


def _stream_check(label, candidate, baseline, tolerance, alpha, margin, sizes=None):
    """Candidate against baseline streams: its p95 above `tolerance` times the baseline's
    (and `margin` more) and a one-sided test sure it is larger (p below `alpha`). With the
    streams' `sizes` ((candidate's, baseline's)) the test and the ratio are taken within
    size strata (`size_strata`, `van_elteren_greater`: the ratio is the strata's p95 ratios
    weighted by their streams), so a different mix of prompt or answer lengths is not read
    as a slower version. None below TTFT_MIN_SAMPLES streams a side."""
    name, words, unit = label
    if min(len(candidate), len(baseline)) < TTFT_MIN_SAMPLES:
        return None
    cand = float(np.percentile(candidate, 95))
    base = float(np.percentile(baseline, 95))
    limit = max(tolerance * base, base + margin)
    pairs = size_strata(candidate, baseline, *sizes) if sizes else []
    if pairs:
        weights = [len(c) + len(b) for c, b in pairs]
        ratios = [np.percentile(c, 95) / max(np.percentile(b, 95), 1e-9) for c, b in pairs]
        ratio = float(np.average(ratios, weights=weights))
        p_value = van_elteren_greater(pairs)
        slower = ratio > tolerance and cand > base + margin
    else:
        p_value = mann_whitney_greater(candidate, baseline)
        slower = cand > limit
    failed = slower and p_value is not None and p_value < alpha
    text = f"{words} {_n(cand)} {'>' if slower else '≤'} {_n(tolerance)}×{_n(base)} {unit}"
    if pairs:
        text += f" ({_n(ratio)}× within {len(pairs)} size strata)"
    if p_value is not None:
        text += f" (p={p_value:.2g})"
    return Check(name, not failed, cand, limit, text)


def caller_check(
    caller: str,
    candidate: Metrics,
    baseline: Metrics,
    sla: SLA,
    *,
    min_requests: int,
    latency_tolerance: float,
    latency_margin_ms: float | Mapping[str, float] = 0.0,
) -> Check | None:
    """A graph release's check of one caller (an ensemble calling the released model): its
    requests through the candidate's arm against its own SLA and its requests through the
    baseline's, by the same gates as the model's own (`analyze`); None below
    `min_requests` through the candidate's arm (nothing to say yet)."""
    verdict = analyze(
        candidate,
        baseline,
        sla,
        min_requests=min_requests,
        latency_tolerance=latency_tolerance,
        latency_margin_ms=latency_margin_ms,
    )
    if verdict.result == "inconclusive":
        return None
    passed = verdict.result == "pass"
    rate = candidate.success_rate
    text = f"caller {caller} {'passes' if passed else 'fails'}: {verdict.reason}"
    return Check(f"caller:{caller}", passed, rate, sla.min_success_rate, text)


def with_check(verdict: Verdict, check: Check | None) -> Verdict:
    """The verdict with one more check: a failed one fails an interval that passed (or adds
    its reason to one that failed); an inconclusive interval stays inconclusive."""
    if check is None or verdict.result == "inconclusive":
        return verdict
    checks = [*verdict.checks, check]
    if not check.passed:
        reason = check.text if verdict.result == "pass" else f"{verdict.reason}; {check.text}"
        return Verdict("fail", checks, reason)
    reason = f"{verdict.reason}, {check.text}" if verdict.result == "pass" else verdict.reason
    return Verdict(verdict.result, checks, reason)
