"""Finishing deployments whose worker died (deployments/leases.py says how that is seen).

A deployment whose worker was killed mid-push would stay RUNNING for ever: the model's next
deployment would be refused as busy and reconcile would leave the model alone. The sweep
finishes it as failed with the reason, marks the nodes still in flight as failed, and so
hands the model back to reconcile, which puts every node back to what the cluster should
serve (the desired state only changes when a deploy succeeds).
"""

from __future__ import annotations

import logging

from django.db import transaction
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
    finished = []
    for pk in leases.lost(running).values_list("pk", flat=True):
        if _finish_lost(pk):
            finished.append(pk)
    return finished


def _finish_lost(pk: int) -> bool:
    """Finish one lost deployment under its row lock (a worker that came back, or a second
    sweep, finds it finished or beating again and leaves it); True when it was finished."""
    now = timezone.now()
    with transaction.atomic():
        deployment = (
            Deployment.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related("cluster", "model", "version")
            .filter(pk=pk)
            .first()
        )
        still_lost = leases.lost(Deployment.objects.filter(pk=pk, status=Deployment.Status.RUNNING))
        if deployment is None or not still_lost.exists():
            return False
        reason = leases.lost_reason(deployment, now=now)
        DeploymentNode.objects.filter(deployment=deployment, status__in=IN_FLIGHT).update(
            status=DeploymentNode.Status.FAILED, error="not finished: its worker stopped"
        )
        deployment_finish(
            deployment,
            ok=False,
            error=f"{reason} Nodes are left as the push left them; reconcile puts them "
            "back to what the cluster serves.",
        )
    log.warning("deployment %s finished as failed: its worker was lost", pk)
    return True
