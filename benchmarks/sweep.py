"""Finishing benchmarks whose worker died (deployments/leases.py says how that is seen).

A benchmark whose worker was killed stays RUNNING and leaves its temporary model loaded on
the staging node. The sweep finishes it as failed with the reason (the levels it finished
are kept) and unloads every temporary model of that run from its node.
"""

from __future__ import annotations

import logging

from benchmarks.models import BenchmarkRun
from benchmarks.services import temp_name_prefix
from benchmarks.verdict import failed_run
from deployments import leases
from deployments.push import client_for
from integrations.triton.errors import TritonError

log = logging.getLogger(__name__)


def benchmarks_lost_sweep() -> list[int]:
    """Finish every RUNNING benchmark whose lease ran out, then unload its temporary
    models (outside the transaction); the ids finished."""
    running = BenchmarkRun.objects.filter(status=BenchmarkRun.Status.RUNNING)
    finished = leases.sweep_lost(running, _finish_lost, related=("version__model", "node"))
    for run in finished:
        log.warning("benchmark %s finished as failed: its worker was lost", run.pk)
        _unload_leftovers(run)
    return [run.pk for run in finished]


def benchmarks_unqueued_sweep() -> list[int]:
    """Queue again the PENDING benchmarks whose task never reached the broker."""
    from benchmarks.tasks import run_benchmark  # tasks import this module

    pending = BenchmarkRun.objects.filter(status=BenchmarkRun.Status.PENDING)
    return leases.requeue_unqueued(pending, run_benchmark.delay, what="benchmark")


def _finish_lost(run: BenchmarkRun, now) -> None:
    run.status, run.finished_at = BenchmarkRun.Status.FAILED, now
    run.error = f"{leases.lost_reason(run, now=now)} Finished levels are kept."
    run.verdict = failed_run(run.error)
    run.save(update_fields=["status", "finished_at", "error", "verdict"])


def _unload_leftovers(run: BenchmarkRun) -> list[str]:
    """Unload the run's temporary models still on its node; the names unloaded."""
    if run.node is None:
        return []
    prefix = temp_name_prefix(run)
    unloaded = []
    try:
        with client_for(run.node) as client:
            for name in sorted(client.loaded_models()):
                if name.startswith(prefix):
                    client.unload(name)
                    unloaded.append(name)
    except TritonError as exc:  # the node is down: it comes back empty (explicit mode)
        log.warning("benchmark %s: temporary model not unloaded from %s: %s", run.pk, run.node, exc)
    return unloaded
