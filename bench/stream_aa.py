"""A/A releases of a streaming model: do equal versions get promoted by the token gates?

Through a real nginx in front of 2 real Triton nodes, with streaming clients reading
`generate_stream` through the router, BENCH_STREAM_AA_RUNS (10) releases of the example
`token_stream` v1 against a copy of itself (the same files with a config parameter of its
own: a config canary, served under its sibling name) are ticked as production ticks them
(a real Celery beat every second, workers on the releases and fleet lanes: the bench world
of bench/release_flow.py). Each release walks 50% -> 100% with 3 s intervals, judged on
time to first token, time between tokens and tokens per second (the example counts its
tokens) against an SLA the example meets (first token p95 <= 500 ms, between tokens p95 <=
60 ms, >= 20 tokens/s), with a 1.5x latency tolerance and at most 2 failed checks.

Prints each run (outcome, seconds, streams ok and failed, the checks that failed) and the
total: goal every run promoted (no false rollback) with 0 failed streams.
Usage: .venv/bin/python bench/stream_aa.py
"""

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

from bench.release_flow import _run, release_bench_world  # noqa: E402

RUNS = int(os.environ.get("BENCH_STREAM_AA_RUNS", 10))
SLA = {
    "p99_latency_ms": 2000,
    "min_success_rate": 99.0,
    "p95_first_token_ms": 500,
    "p95_inter_token_ms": 60,
    "min_tokens_per_s": 20,
}
ANALYSIS = {"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 1.5}


def _failed_checks(release) -> list[str]:
    """The text of every check that failed in the release's analyses."""
    out = []
    for data in release.events.filter(kind="analysis").values_list("data", flat=True):
        out += [c["text"] for c in (data or {}).get("checks", []) if not c.get("passed")]
    return out


def _one(world, port, run: int) -> tuple[str, int]:
    from models_registry.services import model_version_derive
    from releases.models import Release
    from releases.services import release_create
    from tests.releases.test_release_flow import _unload
    from tests.releases.test_release_streams import Streams, _streaming_model

    name = f"bench_stream_aa{run}"
    model, steady, _ = _streaming_model(world, name, sla=SLA)
    patch = {"parameters": {"release_note": {"string_value": f"a/a {run}"}}}
    same = model_version_derive(source=steady, actor=world["ada"], config_patch=patch)
    with Streams(port, name) as streams:
        streams.more(10)
        started = time.time()
        release = release_create(
            cluster=world["cluster"], candidate=same, actor=world["rita"], steps=[50, 100],
            step_interval_s=3, drain_s=0.5, progress_deadline_s=90, analysis=ANALYSIS,
        )  # fmt: skip
        release = _run(release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"}, Release)
        took = time.time() - started
    failed = _failed_checks(release)
    print(
        f"run {run}: {release.phase} in {took:.1f} s; streams ok {streams.ok}, failed "
        f"{streams.failed}; failed checks {len(failed)}{': ' + '; '.join(failed) if failed else ''}"
    )
    _unload(world, model)
    return release.phase, streams.failed


def main() -> None:
    with release_bench_world() as (world, port):
        results = [_one(world, port, run) for run in range(1, RUNS + 1)]
    promoted = sum(phase == "SUCCEEDED" for phase, _ in results)
    failed = sum(f for _, f in results)
    print(
        f"A/A streaming releases: {promoted} of {len(results)} promoted (goal {len(results)}), "
        f"{len(results) - promoted} rolled back or failed (goal 0); failed streams {failed} "
        "(goal 0)"
    )


if __name__ == "__main__":
    main()
