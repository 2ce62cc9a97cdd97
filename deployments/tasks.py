"""Deployment tasks: ids in, one service call, safe to run twice."""

import logging

from celery import shared_task

from deployments.discovery import nodes_discover_all
from deployments.executor import deployment_run
from deployments.models import Deployment, TritonCluster
from deployments.node_status import cluster_status_refresh as node_status_refresh
from deployments.reconcile import cluster_reconcile
from deployments.smoke import model_version_smoke_validate
from deployments.sweep import (
    deployments_lost_sweep,
    deployments_unqueued_sweep,
    deployments_waiting_sweep,
)
from models_registry.models import ModelVersion

log = logging.getLogger(__name__)


# A worker lost mid-push gives the message back (acks_late + reject_on_worker_lost) and the
# next worker runs it again: a re-run applies the same serving set, so it is safe.
@shared_task(
    name="deployments.run_deployment",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=600,
    time_limit=660,
)
def run_deployment(deployment_id: int) -> str:
    """Carry out one deployment; a finished one is left as it is, a deleted one skipped."""
    try:
        return deployment_run(deployment_id=deployment_id).status
    except Deployment.DoesNotExist:
        log.warning("deployment %s is gone: nothing to run", deployment_id)
        return "gone"


@shared_task(
    name="deployments.reconcile_all", soft_time_limit=60, time_limit=90, ignore_result=True
)
def reconcile_all() -> int:
    """One reconcile pass over every cluster; returns how many drift events it recorded. A
    cluster whose pass fails is logged and the others still reconciled."""
    recorded = 0
    for cluster in TritonCluster.objects.all():
        try:
            recorded += len(cluster_reconcile(cluster=cluster))
        except Exception:
            log.exception("reconcile of cluster %s failed", cluster.name)
    return recorded


@shared_task(
    name="deployments.cluster_status_refresh_all",
    soft_time_limit=30,
    time_limit=45,
    ignore_result=True,
    expires=30,
)
def cluster_status_refresh_all() -> int:
    """Read every node of every cluster for the cluster page; returns how many clusters. A
    cluster whose reading fails is logged and the others still read."""
    done = 0
    for cluster in TritonCluster.objects.prefetch_related("nodes"):
        try:
            node_status_refresh(cluster=cluster)
            done += 1
        except Exception:
            log.exception("reading the node status of cluster %s failed", cluster.name)
    return done


@shared_task(
    name="deployments.cluster_status_refresh",
    soft_time_limit=30,
    time_limit=45,
    ignore_result=True,
    expires=30,
)
def cluster_status_refresh(cluster_id: int) -> bool:
    """Read every node of one cluster for the cluster page (a page found no recent reading);
    False when the cluster is gone."""
    cluster = TritonCluster.objects.prefetch_related("nodes").filter(pk=cluster_id).first()
    if cluster is None:
        return False
    node_status_refresh(cluster=cluster)
    return True


@shared_task(
    name="deployments.discover_nodes", soft_time_limit=60, time_limit=90, ignore_result=True
)
def discover_nodes() -> dict[str, dict[str, list[str]]]:
    """One node discovery pass (SWITCHYARD_NODE_DISCOVERY); safe to run twice: a second
    pass finds nothing to change."""
    return {
        name: {"added": done.added, "drained": done.drained}
        for name, done in nodes_discover_all().items()
    }


@shared_task(name="deployments.sweep_lost", soft_time_limit=60, time_limit=90, ignore_result=True)
def sweep_lost() -> int:
    """Finish RUNNING deployments whose worker died (no heartbeat for a lease) and queue again
    those whose task never reached the broker or whose steps' finish was never followed by
    their run; how many of any."""
    return (
        len(deployments_lost_sweep())
        + len(deployments_unqueued_sweep())
        + len(deployments_waiting_sweep())
    )


@shared_task(name="deployments.smoke_validate", soft_time_limit=300, time_limit=330)
def smoke_validate(version_id: int) -> dict | None:
    """Smoke-test a newly registered version on a staging node (re-running repeats the test)."""
    try:
        return model_version_smoke_validate(version_id=version_id)
    except ModelVersion.DoesNotExist:
        log.warning("model version %s is gone: nothing to smoke-test", version_id)
        return None
