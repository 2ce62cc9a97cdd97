"""Finishing benchmarks whose worker died (deployments/leases.py says how that is seen).

A benchmark whose worker was killed stays RUNNING and leaves its temporary model loaded on
the staging node. The sweep finishes it as failed with the reason (the levels it finished
are kept) and unloads every temporary model of that run from its node.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from benchmarks.models import BenchmarkRun
from benchmarks.services import temp_name_prefix
from deployments import leases
from deployments.push import client_for
from integrations.triton.errors import TritonError

log = logging.getLogger(__name__)


def benchmarks_lost_sweep() -> list[int]:
    """Finish every RUNNING benchmark whose lease ran out; the ids finished."""
    running = BenchmarkRun.objects.filter(status=BenchmarkRun.Status.RUNNING)
    finished = []
    for pk in leases.lost(running).values_list("pk", flat=True):
        run = _finish_lost(pk)
        if run is not None:
            finished.append(pk)
            _unload_leftovers(run)
    return finished


def _finish_lost(pk: int) -> BenchmarkRun | None:
    now = timezone.now()
    with transaction.atomic():
        run = (
            BenchmarkRun.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related("version__model", "node__cluster")
            .filter(pk=pk)
            .first()
        )
        rows = BenchmarkRun.objects.filter(pk=pk, status=BenchmarkRun.Status.RUNNING)
        if run is None or not leases.lost(rows).exists():
            return None
        run.status, run.finished_at = BenchmarkRun.Status.FAILED, now
        run.error = f"{leases.lost_reason(run, now=now)} Finished levels are kept."
        run.save(update_fields=["status", "finished_at", "error"])
    log.warning("benchmark %s finished as failed: its worker was lost", pk)
    return run


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
