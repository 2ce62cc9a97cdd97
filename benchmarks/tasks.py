"""Benchmark tasks: ids in, one service call, safe to run twice."""

from celery import shared_task

from benchmarks.services import benchmark_run
from benchmarks.sweep import benchmarks_lost_sweep, benchmarks_unqueued_sweep


@shared_task(name="benchmarks.run", soft_time_limit=900, time_limit=960)
def run_benchmark(run_id: int) -> str:
    """Run one benchmark; a finished (or cancelled) one is left as it is."""
    return benchmark_run(run_id=run_id).status


@shared_task(name="benchmarks.sweep_lost", soft_time_limit=120, time_limit=150, ignore_result=True)
def sweep_lost() -> int:
    """Finish RUNNING benchmarks whose worker died (their temporary models unloaded); how many."""
    return len(benchmarks_lost_sweep()) + len(benchmarks_unqueued_sweep())
