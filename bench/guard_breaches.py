"""Error gates sized by the SLA, and no false rollbacks: real nginx in front of 2 real
Triton nodes, steady client traffic, the release ticked every second.

Prints, measured in this one run:
1. for candidates failing 2x, 5x and 20x what a 99 % success SLA allows (1 % of requests),
   at 5 % of the traffic (the faulty-by-setting example, risk_score v5, its failure rate
   set), BENCH_BREACH_RUNS (3) runs each and their median: seconds and candidate requests
   from the first routed request to weight 0, beside the statistical floor: the candidate
   requests a one-sided 95 % test needs to tell that breach from the allowance (the
   smallest n at which the breach's expected errors, floor(n x rate), are surely more than
   the allowance gives: binomial P(X >= k | n, 1 %) <= 5 %). Goals: detection within 1.5 x
   floor + one tick's candidate requests, and failed requests / (rate x 5 % x detection
   time) at most 1;
2. streaming breaches: the example `token_stream` v4 failing 5x and 20x the allowance of
   its streams at their first response (Triton answers those 400 through generate_stream,
   which the router counts as failed streams), at 5 % of 8 streaming clients' streams of 2
   tokens, BENCH_STREAM_BREACH_RUNS (1) each: the same figures against the same floor
   (BENCH_STREAM_BREACHES=5,20 picks the sizes, empty for none);
3. A/A releases (the candidate's files identical to the baseline's, 5 % -> 50 % -> 100 %):
   BENCH_AA_RUNS (20) at steady traffic, the last BENCH_AA_LOW (4) of them at a low rate
   where intervals are too thin to judge, which end by the configured rule (pause after
   max_inconclusive_checks); goal 0 rolled back (false rollbacks), none still running.
Usage: .venv/bin/python bench/guard_breaches.py
"""

import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
from bench.common import use_bench_queue  # noqa: E402

use_bench_queue()
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchyard_bench")

from bench.release_flow import (  # noqa: E402
    TICK_S,
    TimedTraffic,
    _run,
    release_bench_world,
    routed_and_zero_at,
)

ALLOWED = 0.01  # 1 - 99 % success
SLA = {"p99_latency_ms": 1000, "min_success_rate": 99.0}
WEIGHT = 0.05
BREACHES = (2, 5, 20)
BREACH_RUNS = int(os.environ.get("BENCH_BREACH_RUNS", 3))  # per size: detection is random
AA_RUNS = int(os.environ.get("BENCH_AA_RUNS", 20))
AA_LOW = int(os.environ.get("BENCH_AA_LOW", 4))
LOW_RATE = 8.0  # req/s: 0.4 req/s to a 5 % candidate, far below min_requests per interval
STREAM_BREACHES = tuple(
    int(x) for x in os.environ.get("BENCH_STREAM_BREACHES", "5,20").split(",") if x.strip()
)
STREAM_BREACH_RUNS = int(os.environ.get("BENCH_STREAM_BREACH_RUNS", 1))
STREAM_CLIENTS = 8


def statistical_floor(allowed: float, rate: float, alpha: float = 0.05) -> int:
    """The fewest requests after which a candidate failing at `rate` has, on average, shown
    enough errors (floor(n x rate)) for a one-sided exact binomial test at `alpha` to tell it
    from `allowed`: no gate that sees only these requests can be surer sooner."""
    from scipy import stats

    n = 1
    while True:
        k = math.floor(n * rate)
        if k >= 1 and stats.binom.sf(k - 1, n, allowed) <= alpha:
            return n
        n += 1


def _breach(world, port, times: int, run: int, release_create, Release, setup) -> dict:
    name = f"bench_breach{times}x_{run}"
    _, _, candidate = setup(world, name, 5, SLA, failure_rate=times * ALLOWED)
    cand = str(candidate.version)
    traffic = TimedTraffic(port, name)
    with traffic:
        time.sleep(3)
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[5, 50, 100],
            step_interval_s=600,  # only the guard can act
            drain_s=1,
            progress_deadline_s=900,
        )
        release = _run(release, {"ROLLED_BACK", "FAILED", "SUCCEEDED"}, Release, timeout=600)
        routed_at, zero_at = routed_and_zero_at(release)
    mine = [
        (t, ok)
        for t, _, ok, why in traffic.samples
        if routed_at <= t <= zero_at and why != "retry" and (why == cand or not ok)
    ]
    return _breach_figures(
        f"{times}x the allowance ({times * ALLOWED:.0%} errors) at 5%, run {run}",
        release, mine, times, routed_at, zero_at,
        rate=sum(1 for t, *_ in traffic.samples if routed_at - 3 <= t < routed_at) / 3,
    )  # fmt: skip


def _stream_breach(world, port, times: int, run: int, release_create, Release) -> dict:
    from tests.releases.test_release_streams import Streams, _register, _streaming_model

    name = f"bench_stream_breach{times}x_{run}"
    model, _, _ = _streaming_model(world, name, sla=SLA)
    candidate = _register(model, world["ada"], 4, faults={"failure_rate": times * ALLOWED})
    traffic = Streams(port, name, clients=STREAM_CLIENTS, tokens=2)
    with traffic:
        time.sleep(3)
        release = release_create(
            cluster=world["cluster"], candidate=candidate, actor=world["rita"],
            steps=[5, 50, 100], step_interval_s=600, drain_s=1, progress_deadline_s=900,
        )  # fmt: skip
        release = _run(release, {"ROLLED_BACK", "FAILED", "SUCCEEDED"}, Release, timeout=600)
        routed_at, zero_at = routed_and_zero_at(release)
    cand = str(candidate.version)
    mine = [
        (t, ok) for t, ok, why in traffic.samples
        if routed_at <= t <= zero_at and (why == cand or not ok)
    ]  # fmt: skip
    return _breach_figures(
        f"streams, {times}x the allowance ({times * ALLOWED:.0%} failed at their first "
        f"response) at 5%, run {run}",
        release, mine, times, routed_at, zero_at,
        rate=sum(1 for t, *_ in traffic.samples if routed_at - 3 <= t < routed_at) / 3,
    )  # fmt: skip


def _breach_figures(title, release, mine, times, routed_at, zero_at, *, rate) -> dict:
    """Print one breach run's detection against the floor; its figures."""
    first = mine[0][0] if mine else routed_at
    detect = zero_at - first
    requests, failed = len(mine), sum(1 for _, ok in mine if not ok)
    floor = statistical_floor(ALLOWED, times * ALLOWED)
    tick_requests = rate * WEIGHT * TICK_S
    goal = 1.5 * floor + tick_requests
    expected = rate * WEIGHT * detect
    why = next(
        (e.message for e in release.events.filter(kind="phase") if "ROLLING_BACK" in e.message),
        release.reason,
    )
    print(
        f"{title}: {release.phase}; {detect:.2f} s and {requests} candidate requests from the "
        f"first routed one to weight 0; floor {floor} requests, goal <= 1.5 x {floor} + "
        f"{tick_requests:.0f} (one tick) = {goal:.0f}: {'met' if requests <= goal else 'MISSED'}"
        f"; failed {failed} / (rate {rate:.0f}/s x 5% x {detect:.2f} s = {expected:.1f}) = "
        f"{failed / expected if expected else 0:.2f} (goal <= 1); by: {why}"
    )
    ratio = failed / expected if expected else 0.0
    return {"met": requests <= goal, "ratio": ratio, "requests": requests, "goal": goal}


def _aa(world, port, release_create, Release) -> tuple[int, int, list[str]]:
    from tests.registry.archives import register_risk_score_as
    from tests.releases.test_release_flow import _model_serving

    model, _ = _model_serving(world, "bench_aa", SLA, 2)
    rolled_back, unended, outcomes = 0, 0, []
    for run in range(1, AA_RUNS + 1):
        low = run > AA_RUNS - AA_LOW
        candidate = register_risk_score_as(model, world["ada"], 2)  # the same files again
        traffic = TimedTraffic(port, "bench_aa", rate=LOW_RATE if low else None)
        with traffic:
            time.sleep(2)
            release = release_create(
                cluster=world["cluster"],
                candidate=candidate,
                actor=world["rita"],
                steps=[5, 50, 100],
                step_interval_s=10 if low else 5,
                analysis={"max_inconclusive_checks": 3} if low else {},
                drain_s=1,
                progress_deadline_s=300,
            )
            ends = {"SUCCEEDED", "ROLLED_BACK", "FAILED", "PAUSED"}
            release = _run(release, ends, Release, timeout=400)
        rolled_back += release.phase == "ROLLED_BACK"
        if release.phase == "PAUSED":  # ended by the configured rule: a human decides
            release_rollback_by_hand(release, world)
        elif release.phase != "SUCCEEDED" and release.phase != "ROLLED_BACK":
            unended += 1
        outcomes.append(f"{run}{' (low)' if low else ''}: {release.phase} ({release.reason})")
        print(f"A/A run {outcomes[-1]}; client requests ok {traffic.ok} failed {traffic.failed}")
    return rolled_back, unended, outcomes


def release_rollback_by_hand(release, world) -> None:
    """A paused low-traffic A/A ends as a human would end it here: rolled back by hand (not
    counted as a false rollback: the gates never failed it)."""
    from releases.models import Release
    from releases.services import release_action

    release_action(release=release, action="rollback", actor=world["rita"], reason="bench")
    _run(Release.objects.get(pk=release.pk), {"ROLLED_BACK", "FAILED"}, Release, timeout=120)


def main() -> None:
    with release_bench_world() as (world, port):
        from releases.models import Release
        from releases.services import release_create
        from tests.releases.test_release_flow import _model_with_baseline

        results = []
        for times in BREACHES:
            runs = [
                _breach(world, port, times, run, release_create, Release, _model_with_baseline)
                for run in range(1, BREACH_RUNS + 1)
            ]
            if not runs:  # BENCH_BREACH_RUNS=0: the streaming part or the A/A alone
                continue
            middle = sorted(r["requests"] for r in runs)[len(runs) // 2]
            goal = runs[0]["goal"]
            print(
                f"{times}x, median of {len(runs)} runs: {middle} candidate requests to weight "
                f"0 (goal <= {goal:.0f}: {'met' if middle <= goal else 'MISSED'})"
            )
            results += runs
        for times in STREAM_BREACHES:
            runs = [
                _stream_breach(world, port, times, run, release_create, Release)
                for run in range(1, STREAM_BREACH_RUNS + 1)
            ]
            if runs:
                middle = sorted(r["requests"] for r in runs)[len(runs) // 2]
                goal = runs[0]["goal"]
                print(
                    f"streams {times}x, median of {len(runs)} runs: {middle} candidate streams "
                    f"to weight 0 (goal <= {goal:.0f}: {'met' if middle <= goal else 'MISSED'})"
                )
            results += runs
        if results:
            met = sum(r["met"] for r in results)
            print(
                f"breach runs detected within 1.5 x floor + one tick: {met} of {len(results)} "
                f"(goal all); worst failed / expected {max(r['ratio'] for r in results):.2f} "
                "(goal <= 1)"
            )
        if not AA_RUNS:
            return
        rolled_back, unended, _ = _aa(world, port, release_create, Release)
        print(
            f"A/A releases: {AA_RUNS} ({AA_LOW} at {LOW_RATE:g} req/s), false rollbacks "
            f"{rolled_back} (goal 0), left running {unended} (goal 0)"
        )


if __name__ == "__main__":
    print(f"tick every {TICK_S:g} s; SLA 99% success; breaches {BREACHES}; A/A runs {AA_RUNS}")
    main()
