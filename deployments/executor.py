"""Carrying out a deployment on every node of a cluster at once (the loads themselves are
deployments/serving.py's, shared with reconcile and releases).

Deploy: serving set := previous + target on all nodes (load, READY, warm-up of the target);
if any node fails, nodes already changed go back to the previous set and the deployment
fails naming the node. Otherwise the desired state becomes {target}; after a short drain
the previous versions are retired with a second load (Triton lets in-flight requests on
them finish, docs/TRITON.md §api). Unload: unload everywhere, desired state := nothing.

A deployment that waits for others (an ensemble's steps, deployed with it) runs once they
all succeeded, each one's finish queueing it again; one that failed fails it unrun.

Time between "run" and "serving everywhere" is what users wait for (bench/push_fleet.py), so
the work around the loads is kept off that path: stored files are re-hashed once per
deployment and the bytes shared by every plan and node, the LOADING mark and the outcomes
of the nodes that finish first are written while the others still load, and the last
node's outcome, the desired state and the finish are one commit at the end. Before it, the
cluster's nodes are read once more for the cluster page (deployments/node_status.py: the
page calls no node), so the page shows what the deployment did once it says it finished.
"""

import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from deployments import leases, push, serving
from deployments.backends import BackendRefused
from deployments.models import Deployment, DeploymentNode
from deployments.node_status import cluster_status_refresh_quietly
from deployments.services import (
    deployment_blocked,
    deployment_finish,
    deployment_nodes_record,
    serving_state_set,
)
from integrations.concurrency import fan_out
from models_registry.models import ModelVersion

Status = DeploymentNode.Status


def deployment_run(*, deployment_id: int) -> Deployment:
    """Run a pending deployment to the end; a finished one is returned untouched (idempotent)."""
    with transaction.atomic():
        deployment = (
            Deployment.objects.select_for_update(of=("self",))
            .select_related("cluster", "model", "version__model")
            .get(pk=deployment_id)
        )
        if deployment.is_finished:
            return deployment
        blocked = deployment_blocked(deployment)
        if blocked is None:  # a step still deploying: its finish queues this one again
            return deployment
        if blocked:
            DeploymentNode.objects.filter(deployment=deployment).update(
                status=Status.SKIPPED, error="not run", updated_at=timezone.now()
            )
            return deployment_finish(deployment, ok=False, error=blocked)
        deployment.status = Deployment.Status.RUNNING
        deployment.started_at = deployment.started_at or timezone.now()
        deployment.heartbeat_at = timezone.now()
        deployment.save(update_fields=["status", "started_at", "heartbeat_at"])
    rows = Deployment.objects.filter(pk=deployment.pk)
    try:
        with leases.lease_held(rows, what=f"deployment {deployment.pk}"):
            if deployment.kind == Deployment.Kind.UNLOAD:
                return _run_unload(deployment)
            return _run_deploy(deployment)
    except Exception as exc:
        # Never leave a deployment RUNNING: record the failure, then let the task log it.
        deployment_finish(deployment, ok=False, error=f"Internal error: {exc!r}")
        raise


def _failures(nodes: list, outcomes: dict) -> tuple[list, str]:
    """The nodes whose outcome failed, and their errors as one line."""
    failed = [n for n in nodes if not outcomes[n.pk].ok]
    return failed, "; ".join(f"{n.name}: {outcomes[n.pk].error}" for n in failed)


def _outcome_fields(outcome: push.NodeOutcome) -> dict:
    return {
        "status": Status.READY if outcome.ok else Status.FAILED,
        "load_ms": outcome.load_ms,
        "warmup_ms": outcome.warmup_ms,
        "error": outcome.error,
    }


def _record_outcomes(deployment: Deployment, nodes: list, outcomes: dict) -> None:
    deployment_nodes_record(deployment, {n.pk: _outcome_fields(outcomes[n.pk]) for n in nodes})


def _mark_loading(deployment: Deployment) -> None:
    DeploymentNode.objects.filter(deployment=deployment).update(status=Status.LOADING)


def _versions(deployment: Deployment, numbers: list[int]) -> list[ModelVersion]:
    if not numbers:
        return []
    return list(
        ModelVersion.objects.filter(model=deployment.model, version__in=numbers)
        .select_related("model")
        .order_by("version")
    )


def _load_everywhere(
    deployment: Deployment, nodes: list, plan: push.LoadPlan, warm_version: int
) -> tuple[dict, list]:
    """Apply the plan on every node at once: (outcomes, nodes whose outcome is not written).

    The writes overlap the loads: LOADING is marked once they are sent, and every outcome but
    the last is written as it comes in; the last one goes into the caller's final commit.
    """
    written: set[int] = set()

    def record_unless_last(node, outcome: push.NodeOutcome) -> None:
        if len(written) < len(nodes) - 1:
            _record_outcomes(deployment, [node], {node.pk: outcome})
            written.add(node.pk)

    outcomes = serving.serving_load(
        nodes,
        plan,
        warm_version=warm_version,
        while_waiting=lambda: _mark_loading(deployment),
        on_result=record_unless_last,
    )
    return outcomes, [n for n in nodes if n.pk not in written]


def _refusal_reason(exc: push.CorruptArtifact) -> str:
    if isinstance(exc, BackendRefused):
        return "the cluster does not allow this backend"
    if isinstance(exc, push.RepositoryRefused):
        return "the cluster's repository folder is refused"
    return "the stored files failed verification"


def _run_deploy(deployment: Deployment) -> Deployment:
    cluster, target = deployment.cluster, deployment.version
    previous = _versions(deployment, deployment.previous_versions)
    staged = sorted({*previous, target}, key=lambda v: v.version)
    nodes = list(cluster.nodes.all())
    blobs: dict[str, bytes] = {}  # verified bytes by sha256, shared by this run's plans
    try:
        plan = serving.serving_plan(cluster, staged, blobs=blobs)
    except push.CorruptArtifact as exc:
        why = _refusal_reason(exc)
        DeploymentNode.objects.filter(deployment=deployment).update(
            status=Status.SKIPPED, error=f"not loaded: {why}"
        )
        return deployment_finish(deployment, ok=False, error=f"Refused before any load: {exc}.")
    outcomes, unwritten = _load_everywhere(deployment, nodes, plan, target.version)
    failed, reasons = _failures(nodes, outcomes)
    if failed:
        _record_outcomes(deployment, unwritten, outcomes)
        _revert(deployment, [n for n in nodes if outcomes[n.pk].ok], previous, blobs)
        cluster_status_refresh_quietly(cluster=cluster)
        return deployment_finish(
            deployment,
            ok=False,
            error=f"Failed on {len(failed)} of {len(nodes)} "
            f"node(s), the others were put back to their previous state. {reasons}",
        )
    if len(staged) == 1:  # nothing to retire: the nodes are as they stay
        cluster_status_refresh_quietly(cluster=cluster)
    with transaction.atomic():
        _record_outcomes(deployment, unwritten, outcomes)
        serving_state_set(cluster=cluster, model=deployment.model, versions=[target])
        if len(staged) == 1:
            return deployment_finish(deployment, ok=True)
    return _retire_previous(deployment, nodes, target, blobs)


def _revert(deployment: Deployment, nodes: list, previous: list[ModelVersion], blobs: dict) -> None:
    outcomes = serving.serving_set_revert(
        cluster=deployment.cluster,
        model=deployment.model.name,
        nodes=nodes,
        previous=previous,
        blobs=blobs,
    )
    deployment_nodes_record(
        deployment,
        {
            n.pk: {"status": Status.REVERTED, "error": ""}
            if outcomes[n.pk].ok
            else {"status": Status.FAILED, "error": f"revert failed: {outcomes[n.pk].error}"}
            for n in nodes
        },
    )


def _retire_previous(
    deployment: Deployment, nodes: list, target: ModelVersion, blobs: dict
) -> Deployment:
    time.sleep(settings.SWITCHYARD_DEPLOY_DRAIN_S)
    plan = serving.serving_plan(deployment.cluster, [target], blobs=blobs)
    outcomes = serving.serving_load(nodes, plan, warm_version=None)
    cluster_status_refresh_quietly(cluster=deployment.cluster)
    failed, reasons = _failures(nodes, outcomes)
    if failed:
        return deployment_finish(
            deployment,
            ok=False,
            error=f"v{target.version} serves everywhere but "
            f"the previous version was not retired on {len(failed)} node(s); "
            f"reconcile retries. {reasons}",
        )
    return deployment_finish(deployment, ok=True)


def _run_unload(deployment: Deployment) -> Deployment:
    nodes = list(deployment.cluster.nodes.all())
    with transaction.atomic():
        serving_state_set(cluster=deployment.cluster, model=deployment.model, versions=[])
    model = deployment.model.name
    outcomes = fan_out(nodes, lambda node: push.unload_on_node(node, model))
    cluster_status_refresh_quietly(cluster=deployment.cluster)
    failed, reasons = _failures(nodes, outcomes)
    with transaction.atomic():
        _record_outcomes(deployment, nodes, outcomes)
        if failed:
            return deployment_finish(
                deployment,
                ok=False,
                error=f"Unload failed on {len(failed)} node(s); reconcile retries. {reasons}",
            )
        return deployment_finish(deployment, ok=True)
