"""Carrying out a deployment on every node of a cluster at once.

Deploy: serving set := previous + target on all nodes (load, READY, warm-up of the target);
if any node fails, nodes already changed go back to the previous set and the deployment
fails naming the node. Otherwise the desired state becomes {target}; after a short drain
the previous versions are retired with a second load (Triton lets in-flight requests on
them finish, TRITON.md §2.3). Unload: unload everywhere, desired state := nothing.
"""

import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from deployments import push
from deployments.models import Deployment, DeploymentNode, TritonCluster
from deployments.services import deployment_finish, deployment_node_record, serving_state_set
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
        deployment.status = Deployment.Status.RUNNING
        deployment.started_at = deployment.started_at or timezone.now()
        deployment.save(update_fields=["status", "started_at"])
    try:
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


def _record_outcomes(deployment: Deployment, nodes: list, outcomes: dict) -> None:
    for node in nodes:
        outcome = outcomes[node.pk]
        deployment_node_record(
            deployment,
            node,
            status=Status.READY if outcome.ok else Status.FAILED,
            load_ms=outcome.load_ms,
            warmup_ms=outcome.warmup_ms,
            error=outcome.error,
        )


def _versions(deployment: Deployment, numbers: list[int]) -> list[ModelVersion]:
    return list(
        ModelVersion.objects.filter(model=deployment.model, version__in=numbers)
        .select_related("model")
        .order_by("version")
    )


def _plan(cluster: TritonCluster, versions: list[ModelVersion]) -> push.LoadPlan:
    upload = cluster.push_mode == TritonCluster.PushMode.UPLOAD
    plan = push.build_plan(versions, upload=upload)
    if not upload:
        push.materialize(cluster.repository_path, versions, plan)
    return plan


def _run_deploy(deployment: Deployment) -> Deployment:
    cluster, target = deployment.cluster, deployment.version
    previous = _versions(deployment, deployment.previous_versions)
    staged = sorted({*previous, target}, key=lambda v: v.version)
    nodes = list(cluster.nodes.all())
    try:
        plan = _plan(cluster, staged)
    except push.CorruptArtifact as exc:
        DeploymentNode.objects.filter(deployment=deployment).update(
            status=Status.SKIPPED, error="not loaded: the stored files failed verification"
        )
        return deployment_finish(deployment, ok=False, error=f"Refused before any load: {exc}.")
    DeploymentNode.objects.filter(deployment=deployment).update(status=Status.LOADING)
    outcomes = push.fan_out(
        nodes, lambda node: push.apply_on_node(node, plan, warm_version=target.version)
    )
    _record_outcomes(deployment, nodes, outcomes)
    failed, reasons = _failures(nodes, outcomes)
    if failed:
        _revert(deployment, [n for n in nodes if outcomes[n.pk].ok], previous)
        return deployment_finish(
            deployment,
            ok=False,
            error=f"Failed on {len(failed)} of {len(nodes)} "
            f"node(s), the others were put back to their previous state. {reasons}",
        )
    with transaction.atomic():
        serving_state_set(cluster=cluster, model=deployment.model, versions=[target])
    if len(staged) > 1:
        return _retire_previous(deployment, nodes, target)
    return deployment_finish(deployment, ok=True)


def _revert(deployment: Deployment, nodes: list, previous: list[ModelVersion]) -> None:
    if not nodes:
        return
    if previous:
        plan = _plan(deployment.cluster, previous)
        outcomes = push.fan_out(nodes, lambda n: push.apply_on_node(n, plan, warm_version=None))
    else:
        model = deployment.model.name
        outcomes = push.fan_out(nodes, lambda n: push.unload_on_node(n, model))
    for node in nodes:
        outcome = outcomes[node.pk]
        deployment_node_record(
            deployment,
            node,
            status=Status.REVERTED if outcome.ok else Status.FAILED,
            error="" if outcome.ok else f"revert failed: {outcome.error}",
        )


def _retire_previous(deployment: Deployment, nodes: list, target: ModelVersion) -> Deployment:
    time.sleep(settings.SWITCHYARD_DEPLOY_DRAIN_S)
    plan = _plan(deployment.cluster, [target])
    outcomes = push.fan_out(nodes, lambda n: push.apply_on_node(n, plan, warm_version=None))
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
    outcomes = push.fan_out(nodes, lambda node: push.unload_on_node(node, model))
    _record_outcomes(deployment, nodes, outcomes)
    failed, reasons = _failures(nodes, outcomes)
    if failed:
        return deployment_finish(
            deployment,
            ok=False,
            error=f"Unload failed on {len(failed)} node(s); reconcile retries. {reasons}",
        )
    return deployment_finish(deployment, ok=True)
