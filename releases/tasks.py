"""Release ticks: ids in, one service call, safe to run twice (the tick is level-triggered)."""

import logging

from celery import shared_task
from django.conf import settings

from deployments.models import TritonCluster
from integrations.routers import RouterError
from releases.loads import load_run
from releases.models import Release
from releases.routing import router_logs_rotated, router_sync
from releases.state_machine import TERMINAL
from releases.tick import release_tick_isolated

log = logging.getLogger(__name__)


@shared_task(name="releases.tick", soft_time_limit=120, time_limit=150, ignore_result=True)
def tick(release_id: int) -> None:
    """One tick of one release (skipped when another tick holds it); a failure is recorded on
    that release and never raised."""
    release_tick_isolated(release_id=release_id)


@shared_task(
    name="releases.serving_load",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=600,
    time_limit=660,
    ignore_result=True,
)
def serving_load(load_id: int) -> str:
    """Load a release's serving set on every node (fleet lane; the tick observes the row).
    Claimed once: a redelivered or resent message finds it taken and does nothing."""
    return load_run(load_id=load_id)


@shared_task(name="releases.tick_active", soft_time_limit=10, time_limit=20, ignore_result=True)
def tick_active() -> int:
    """Queue one tick per active release on the releases lane (each its own task, so one slow
    or failing release never holds up another); returns how many were queued."""
    ids = list(
        Release.objects.exclude(phase__in=[p.value for p in TERMINAL]).values_list("pk", flat=True)
    )
    for release_id in ids:
        tick.apply_async(args=[release_id], expires=settings.SWITCHYARD_TICK_EXPIRES_S)
    return len(ids)


@shared_task(
    name="releases.router_logs_rotate", soft_time_limit=60, time_limit=90, ignore_result=True
)
def router_logs_rotate() -> int:
    """Every nginx router's logs above SWITCHYARD_ROUTER_LOG_MAX_BYTES rotated (one old copy
    kept); returns how many logs were. One router that fails does not stop the others."""
    rotated = 0
    for cluster in TritonCluster.objects.filter(router__driver="nginx"):
        try:
            rotated += len(router_logs_rotated(cluster))
        except RouterError as exc:
            log.warning("logs of the router of %s not rotated: %s", cluster.name, exc)
    return rotated


@shared_task(name="releases.routers_sync", soft_time_limit=60, time_limit=90, ignore_result=True)
def routers_sync() -> int:
    """Every running nginx router sends to its cluster's nodes as they are now; returns how
    many routers changed. One router that fails does not stop the others."""
    changed = 0
    for cluster in TritonCluster.objects.filter(router__driver="nginx"):
        try:
            changed += router_sync(cluster)
        except RouterError as exc:
            log.warning("router of %s not synced with its nodes: %s", cluster.name, exc)
    return changed
