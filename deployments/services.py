"""Writes for clusters, nodes and deployments. Triton is called outside transactions only."""

import copy
import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from accounts.errors import ApplicationError
from audit.services import audit_record
from deployments import leases
from deployments.models import (
    Deployment,
    DeploymentNode,
    ServingState,
    ServingVersion,
    TritonCluster,
    TritonNode,
)
from deployments.validation import (
    cluster_metrics,
    cluster_router,
    node_urls_check,
    repository_dir,
)
from integrations.metrics_source import MetricsSettingsError
from integrations.paths import PathError
from integrations.routers.settings import RouterSettingsError
from models_registry.models import Model, ModelVersion
from models_registry.services import PRODUCTION_ALIAS, RegistryError, alias_set

log = logging.getLogger(__name__)


class DeploymentError(ApplicationError):
    """A cluster, node or deployment write refused (400 unless `status` says otherwise)."""


def _save_new(obj, *, what: str, actor, action: str, details: dict | None = None):
    try:
        # Uniqueness is left to the database: a duplicate is a 409 (IntegrityError below).
        obj.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise DeploymentError(messages[0], field=None if field == "__all__" else field) from None
    try:
        with transaction.atomic():
            obj.save()
            audit_record(actor=actor, action=action, obj=obj, details=details or {})
    except IntegrityError as exc:
        if "node_url_unique_in_cluster" in str(exc):
            raise DeploymentError(
                "This URL is already a node of the cluster.", field="http_url", status=409
            ) from exc
        raise DeploymentError(f"{what} already exists.", field="name", status=409) from exc
    return obj


def cluster_create(*, actor, **fields) -> TritonCluster:
    """Register a Triton cluster; its settings checked (DeploymentError naming the field)."""
    cluster = TritonCluster(**fields)
    cluster_settings_check(cluster)
    return _save_new(
        cluster, what=f"A cluster named '{cluster.name}'", actor=actor, action="cluster.created"
    )


def cluster_update(*, cluster: TritonCluster, actor, **fields) -> TritonCluster:
    """Change a cluster's settings (router, metrics, cost, ...); audited with before/after.

    The cluster as it would be is checked first: refused with DeploymentError (nothing
    stored, `cluster` unchanged) when a setting is unusable.
    """
    changed = copy.copy(cluster)
    for key, value in fields.items():
        setattr(changed, key, value)
    cluster_settings_check(changed)
    try:
        changed.full_clean()
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise DeploymentError(messages[0], field=None if field == "__all__" else field) from None
    before = {k: getattr(cluster, k) for k in fields}
    with transaction.atomic():
        changed.save()
        audit_record(
            actor=actor,
            action="cluster.updated",
            obj=changed,
            details={"before": _plain(before), "after": _plain(fields)},
        )
    return changed


def cluster_settings_check(cluster: TritonCluster) -> None:
    """Raise DeploymentError (field such as `router.listen`) unless the cluster's router,
    metrics source and repository folder are usable; the rules live in integrations."""
    try:
        router = cluster_router(cluster)
        cluster_metrics(cluster)
    except (RouterSettingsError, MetricsSettingsError) as exc:
        raise DeploymentError(exc.message, field=exc.field) from None
    if (
        router.driver == "nginx"
        and cluster.pk
        and cluster.nodes.filter(http_url__startswith="https:")
    ):
        raise DeploymentError(
            "The nginx router proxies plain HTTP and this cluster has https:// nodes.",
            field="router.driver",
        )
    if cluster.push_mode == TritonCluster.PushMode.FILESYSTEM and not cluster.repository_path:
        raise DeploymentError(
            "Filesystem push mode needs the cluster's repository path.", field="repository_path"
        )
    if cluster.repository_path:
        try:
            repository_dir(cluster.repository_path)
        except PathError as exc:
            raise DeploymentError(str(exc), field="repository_path") from None


def _plain(values: dict) -> dict:
    return {
        k: (str(v) if not isinstance(v, dict | list | str | int | float) else v)
        for k, v in values.items()
    }


def node_create(*, cluster: TritonCluster, actor, **fields) -> TritonNode:
    """Add a node to a cluster; audited. Health is learned by reconcile.

    Its addresses must be usable by every consumer and inside the allowed networks, and its
    HTTP URL unique in the cluster (DeploymentError naming the field otherwise).
    """
    node = TritonNode(cluster=cluster, **fields)
    errors = node_urls_check(http=node.http_url, grpc=node.grpc_url, metrics=node.metrics_url)
    if errors:
        field, message = next(iter(errors.items()))
        raise DeploymentError(message, field=field)
    if node.http_url.startswith("https:") and cluster_router(cluster).driver == "nginx":
        raise DeploymentError(
            "The cluster's nginx router proxies plain HTTP: give the node an http:// URL.",
            field="http_url",
        )
    if cluster.nodes.filter(http_url=node.http_url).exists():
        raise DeploymentError(
            f"Node {node.http_url} is already in {cluster.name}.", field="http_url"
        )
    return _save_new(
        node,
        what=f"A node named '{node.name}' in {cluster.name}",
        actor=actor,
        action="node.created",
    )


def node_remove(*, node: TritonNode, actor) -> None:
    """Take a node out of its cluster; audited. Its deployment and drift history stays.

    Reconcile, telemetry and pushes stop counting it at once; a running router stops sending
    to it at its next sync. Nothing is unloaded from the node (it may be on its way out or
    unreachable). Refused (409) while a deployment runs on the cluster.
    """
    with transaction.atomic():
        cluster = TritonCluster.objects.select_for_update().get(pk=node.cluster_id)
        busy = Deployment.objects.filter(
            cluster=cluster, status__in=[Deployment.Status.PENDING, Deployment.Status.RUNNING]
        ).first()
        if busy:
            raise DeploymentError(
                f"Deployment {busy.pk} on {cluster.name} is still {busy.status}; "
                f"remove {node.name} once it has finished.",
                status=409,
            )
        audit_record(
            actor=actor, action="node.removed", obj=node, details={"http_url": node.http_url}
        )
        node.delete()


def serving_versions(*, cluster: TritonCluster, model: Model) -> list[ModelVersion]:
    state = ServingState.objects.filter(cluster=cluster, model=model).first()
    if state is None:
        return []
    return [sv.version for sv in state.serving_versions.select_related("version__model")]


def serving_state_set(*, cluster: TritonCluster, model: Model, versions: list[ModelVersion]):
    """Make `versions` the desired set for (cluster, model); bumps the generation."""
    state, created = ServingState.objects.select_for_update().get_or_create(
        cluster=cluster, model=model, defaults={"generation": 1}
    )
    kept: set[int] = set()
    if not created:  # the row lock keeps others off this state's versions until commit
        state.serving_versions.exclude(version__in=versions).delete()
        kept = set(state.serving_versions.values_list("version_id", flat=True))
        state.generation += 1
        state.save()
    missing = {v.pk: v for v in versions if v.pk not in kept}
    ServingVersion.objects.bulk_create(
        ServingVersion(state=state, version=v) for v in missing.values()
    )
    return state


def serving_owner_set(*, cluster: TritonCluster, model: Model, owner: str) -> None:
    """Claim (or with "" release) the model's serving state for a release."""
    ServingState.objects.filter(cluster=cluster, model=model).update(owner=owner)


def refuse_if_busy(cluster: TritonCluster, model: Model) -> None:
    """Raise DeploymentError (409) while a deployment or a release drives this model."""
    owner = (
        ServingState.objects.filter(cluster=cluster, model=model)
        .values_list("owner", flat=True)
        .first()
    )
    if owner:
        raise DeploymentError(
            f"{model.name} on {cluster.name} is under {owner.replace(':', ' ')}; "
            "finish or roll it back first.",
            status=409,
        )
    _refuse_running_deployment(cluster, model)


def _refuse_running_deployment(cluster: TritonCluster, model: Model) -> None:
    busy = Deployment.objects.filter(
        cluster=cluster,
        model=model,
        status__in=[Deployment.Status.PENDING, Deployment.Status.RUNNING],
    ).first()
    if busy:
        raise DeploymentError(
            f"Deployment {busy.pk} of {model.name} on {cluster.name} is still {busy.status}; "
            "wait for it to finish.",
            status=409,
        )


def deployment_create(
    *, cluster: TritonCluster, version: ModelVersion | None, actor, model: Model | None = None
) -> Deployment:
    """Record a deploy (version given) or unload (version None) and queue it; audited."""
    model = version.model if version is not None else model
    nodes = list(cluster.nodes.all())
    if not nodes:
        raise DeploymentError(f"Cluster {cluster.name} has no nodes.", field="cluster")
    with transaction.atomic():
        TritonCluster.objects.select_for_update().get(pk=cluster.pk)
        refuse_if_busy(cluster, model)
        previous = [v.version for v in serving_versions(cluster=cluster, model=model)]
        deployment = Deployment.objects.create(
            cluster=cluster,
            model=model,
            version=version,
            requested_by=actor,
            kind=Deployment.Kind.DEPLOY if version else Deployment.Kind.UNLOAD,
            previous_versions=previous,
            target_versions=[version.version] if version else [],
        )
        DeploymentNode.objects.bulk_create(
            DeploymentNode(deployment=deployment, node=node, node_name=node.name) for node in nodes
        )
        audit_record(
            actor=actor,
            action=f"deployment.{deployment.kind}_requested",
            obj=deployment,
            details={"previous": previous},
        )
        transaction.on_commit(lambda: _enqueue(deployment.pk))
    return deployment


def _enqueue(deployment_id: int) -> None:
    from deployments.tasks import run_deployment

    leases.enqueue_or_mark(
        run_deployment.delay, Deployment.objects.all(), deployment_id, what="deployment"
    )


def deployment_nodes_record(
    deployment: Deployment, fields_by_node: Mapping[int, Mapping[str, Any]]
) -> None:
    """Write the outcomes of many nodes of a deployment ({node id: fields}) in one UPDATE."""
    if not fields_by_node:
        return
    if len(fields_by_node) == 1:
        ((node_id, fields),) = fields_by_node.items()
        DeploymentNode.objects.filter(deployment=deployment, node_id=node_id).update(
            updated_at=timezone.now(), **fields
        )
        return
    names = sorted({name for fields in fields_by_node.values() for name in fields})
    values = {
        name: Case(
            *(
                When(
                    node_id=node_id, then=Value(fields[name], DeploymentNode._meta.get_field(name))
                )
                for node_id, fields in fields_by_node.items()
                if name in fields
            ),
            default=F(name),
        )
        for name in names
    }
    DeploymentNode.objects.filter(deployment=deployment, node_id__in=list(fields_by_node)).update(
        updated_at=timezone.now(), **values
    )


def deployment_finish(deployment: Deployment, *, ok: bool, error: str = "") -> Deployment:
    """Mark the deployment finished and audit it; inside a caller's transaction, part of it.

    The production alias rule (docs/API.md): a successful deploy to a production cluster
    moves `production` to the version it made that cluster serve.
    """
    with transaction.atomic(savepoint=False):
        deployment.status = Deployment.Status.SUCCEEDED if ok else Deployment.Status.FAILED
        deployment.error = error
        deployment.finished_at = timezone.now()
        deployment.save(update_fields=["status", "error", "finished_at"])
        audit_record(
            actor=None,
            action=f"deployment.{deployment.status}",
            obj=deployment,
            details={"error": error} if error else {},
        )
        if ok:
            _production_alias_follows(deployment)
    return deployment


def _production_alias_follows(deployment: Deployment) -> None:
    serves_production = (
        deployment.kind == Deployment.Kind.DEPLOY
        and deployment.cluster.environment == TritonCluster.Environment.PRODUCTION
        and deployment.version is not None
    )
    if not serves_production:
        return
    try:
        alias_set(
            model=deployment.model, name=PRODUCTION_ALIAS, version=deployment.version, actor=None
        )
    except RegistryError as exc:  # a release holds the alias: it decides (its promote)
        log.warning("deployment %s left the production alias: %s", deployment.pk, exc.message)
