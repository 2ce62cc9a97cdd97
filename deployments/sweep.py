"""Finishing deployments whose worker died (deployments/leases.py says how that is seen).

A deployment whose worker was killed mid-push would stay RUNNING for ever: the model's next
deployment would be refused as busy and reconcile would leave the model alone. The sweep
finishes it as failed with the reason, marks the nodes still in flight as failed, and so
hands the model back to reconcile, which puts every node back to what the cluster should
serve (the desired state only changes when a deploy succeeds).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from deployments import leases
from deployments.models import Deployment, DeploymentNode
from deployments.services import deployment_finish

log = logging.getLogger(__name__)

IN_FLIGHT = (
    DeploymentNode.Status.PENDING,
    DeploymentNode.Status.LOADING,
    DeploymentNode.Status.WARMING,
)


def deployments_lost_sweep() -> list[int]:
    """Finish every RUNNING deployment whose lease ran out; the ids finished."""
    running = Deployment.objects.filter(status=Deployment.Status.RUNNING)
    finished = leases.sweep_lost(running, _finish_lost, related=("cluster", "model", "version"))
    for deployment in finished:
        log.warning("deployment %s finished as failed: its worker was lost", deployment.pk)
    return [d.pk for d in finished]


def deployments_unqueued_sweep() -> list[int]:
    """Queue again the PENDING deployments whose task never reached the broker."""
    from deployments.tasks import run_deployment  # tasks import this module

    pending = Deployment.objects.filter(status=Deployment.Status.PENDING)
    return leases.requeue_unqueued(pending, run_deployment.delay, what="deployment")


def deployments_waiting_sweep() -> list[int]:
    """Queue again the PENDING deployments whose every prerequisite finished more than a
    lease ago: the finish queues them at once, unless its worker died between its commit
    and the send. Running one that may not run yet is a no-op (deployments/executor.py)."""
    from deployments.tasks import run_deployment  # tasks import this module

    cutoff = timezone.now() - timedelta(seconds=leases.lease_s())
    stuck = (
        Deployment.objects.filter(status=Deployment.Status.PENDING, waits_for__isnull=False)
        .exclude(waits_for__finished_at__isnull=True)
        .exclude(waits_for__finished_at__gt=cutoff)
        .distinct()
    )
    queued = []
    for pk in stuck.values_list("pk", flat=True):
        if leases.enqueue_or_mark(
            run_deployment.delay, Deployment.objects.all(), pk, what="deployment"
        ):
            queued.append(pk)
    return queued


def _finish_lost(deployment: Deployment, now) -> None:
    """Failed with the reason; the nodes still in flight marked failed (the model is free)."""
    DeploymentNode.objects.filter(deployment=deployment, status__in=IN_FLIGHT).update(
        status=DeploymentNode.Status.FAILED, error="not finished: its worker stopped"
    )
    deployment_finish(
        deployment,
        ok=False,
        error=f"{leases.lost_reason(deployment, now=now)} Nodes are left as the push left "
        "them; reconcile puts them back to what the cluster serves.",
    )
