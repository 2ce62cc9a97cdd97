"""Benchmark tasks: ids in, one service call, safe to run twice."""

from celery import shared_task

from benchmarks.services import benchmark_run


@shared_task(name="benchmarks.run", soft_time_limit=900, time_limit=960)
def run_benchmark(run_id: int) -> str:
    """Run one benchmark; a finished (or cancelled) one is left as it is."""
    return benchmark_run(run_id=run_id).status
