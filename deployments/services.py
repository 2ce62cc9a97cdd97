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
from deployments import leases, node_keys, selectors
from deployments.backends import backend_refusal
from deployments.models import (
    Deployment,
    DeploymentNode,
    ServingState,
    ServingVersion,
    TritonCluster,
    TritonNode,
)
from deployments.prices import CLUSTER_PRICE_FIELDS, price_change, price_history_start
from deployments.selectors import node_control_access
from deployments.validation import (
    cluster_metrics,
    cluster_router,
    node_urls_check,
    repository_dir,
)
from integrations.metrics_source import MetricsSettingsError
from integrations.paths import PathError
from integrations.routers.settings import RouterSettingsError
from integrations.secrets import SecretError
from integrations.triton.model_config.graph import Step, is_ensemble, model_calls, serves_step
from integrations.triton.restricted import NodeKeyError
from models_registry import selectors as registry_selectors
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
            price_history_start(obj=obj, actor=actor)
    except IntegrityError as exc:
        if "node_url_unique_in_cluster" in str(exc):
            raise DeploymentError(
                "This URL is already a node of the cluster.", field="http_url", status=409
            ) from exc
        raise DeploymentError(f"{what} already exists.", field="name", status=409) from exc
    return obj


def _key_columns(fields: dict) -> dict[str, str] | None:
    """Take `api_key` / `api_key_ref` out of `fields`: the columns that hold them (None when
    neither was given). DeploymentError names the refused field, never the value."""
    if "api_key" not in fields and "api_key_ref" not in fields:
        return None
    api_key, api_key_ref = fields.pop("api_key", None), fields.pop("api_key_ref", None)
    try:
        return node_keys.stored_fields(api_key=api_key, api_key_ref=api_key_ref)
    except NodeKeyError as exc:
        raise DeploymentError(str(exc), field="api_key" if api_key else "api_key_ref") from None
    except SecretError as exc:
        raise DeploymentError(str(exc), field="api_key_ref") from None


def _key_change(before: TritonCluster, after: TritonCluster) -> dict:
    """What an audit row says of a key change: set, changed or cleared, and how it is held."""
    had = bool(before.api_key_ciphertext or before.api_key_ref)
    has = bool(after.api_key_ciphertext or after.api_key_ref)
    change = ("changed" if had else "set") if has else "cleared"
    return {"api_key": change, "api_key_kind": after.key_kind}


def cluster_create(*, actor, **fields) -> TritonCluster:
    """Register a Triton cluster; its settings checked (DeploymentError naming the field).

    `api_key` (stored encrypted) or `api_key_ref` is its nodes' key; the audit row says a key
    was set and how it is held, never its value.
    """
    columns = _key_columns(fields)
    cluster = TritonCluster(**fields, **(columns or {}))
    cluster_settings_check(cluster)
    details = _key_change(TritonCluster(), cluster) if columns and cluster.has_api_key else {}
    return _save_new(
        cluster,
        what=f"A cluster named '{cluster.name}'",
        actor=actor,
        action="cluster.created",
        details={
            **details,
            **({"custom_backends": cluster.custom_backends} if cluster.custom_backends else {}),
        },
    )


def cluster_update(*, cluster: TritonCluster, actor, **fields) -> TritonCluster:
    """Change a cluster's settings (router, metrics, cost, node key ...); audited with
    before/after (a key change as set/changed/cleared, never its value).

    The cluster as it would be is checked first: refused with DeploymentError (nothing
    stored, `cluster` unchanged) when a setting is unusable.
    """
    columns = _key_columns(fields)
    changed = copy.copy(cluster)
    for key, value in {**fields, **(columns or {})}.items():
        setattr(changed, key, value)
    cluster_settings_check(changed)
    try:
        changed.full_clean()
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise DeploymentError(messages[0], field=None if field == "__all__" else field) from None
    prices = {k: fields.pop(k) for k in CLUSTER_PRICE_FIELDS if k in fields}
    before = {k: getattr(cluster, k) for k in fields}
    details = {"before": _plain(before), "after": _plain(fields)}
    if columns is not None:
        details.update(_key_change(cluster, changed))
    with transaction.atomic():
        # The price is the price history's to change (deployments/prices.py).
        for key in prices:
            setattr(changed, key, getattr(cluster, key))
        if fields or columns is not None or not prices:
            changed.save()
            audit_record(
                actor=actor,
                action="cluster.updated",
                obj=changed,
                details=details,
            )
        if prices:
            price_change(obj=changed, actor=actor, **prices)
        if "custom_backends" in fields and fields["custom_backends"] != before["custom_backends"]:
            # Each backend is native code the cluster's nodes will load: its own audit row.
            audit_record(
                actor=actor,
                action="cluster.backends_changed",
                obj=changed,
                details={"before": before["custom_backends"], "after": fields["custom_backends"]},
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
    """Add a node to a cluster; audited. Health is learned by reconcile; whether the node
    answers model control without a key is asked now (`control_access`, its `warnings`).

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
    # Asked before anything is written (a request's own transaction holds no lock yet).
    node.control_access = node_control_access(node)
    return _save_new(
        node,
        what=f"A node named '{node.name}' in {cluster.name}",
        actor=actor,
        action="node.created",
        details={"control_access": node.control_access},
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


def refuse_if_graph_breaks(
    cluster: TritonCluster,
    model: Model,
    version: ModelVersion | None,
    *,
    going: set[str] = frozenset(),
) -> None:
    """409 when making `cluster` serve exactly `version` of `model` (nothing: an unload)
    would take a model away from what calls it there: unloading a step of an ensemble
    serving on the cluster (or a model a BLS model there declares it calls), or replacing
    the version it pins. Callers in `going` are unloaded first (an unload with its callers).
    The message names each caller and call; the errors list them."""
    serving_now = [version.version] if version is not None else []
    broken = [
        (caller, step)
        for caller, step in _callers(cluster, model)
        if caller.model.name not in going and not serves_step(step, serving_now)
    ]
    if broken:
        what = "Unloading" if version is None else f"Serving only v{version.version} of"
        listed = "; ".join(f"{c.model.name} v{c.version} calls {step}" for c, step in broken)
        message = (
            f"{what} {model.name} on {cluster.name} would break what calls it there: "
            f"{listed}. Unload or change those first (an unload through the API takes "
            '`{"with_callers": true}` to unload them before it).'
        )
        raise DeploymentError(
            message,
            status=409,
            errors=[
                {"field": "model", "message": message},
                *(
                    {
                        "field": "model",
                        "message": f"{c.model.name} v{c.version} ({_kind(c)}) calls {step} "
                        f"on {cluster.name}.",
                    }
                    for c, step in broken
                ),
            ],
        )


def _kind(caller: ModelVersion) -> str:
    return "ensemble" if is_ensemble(caller.config_json) else "BLS"


# What a model calls may call more: how deep `calls_planned` follows them.
MAX_GRAPH_DEPTH = 8


def calls_planned(cluster: TritonCluster, version: ModelVersion) -> list[ModelVersion]:
    """The versions to deploy before `version` on `cluster`, each before what calls it: each
    model it calls (an ensemble's steps, a BLS model's declared calls, and theirs) that
    serves nothing there yet, at its pinned version, else the registry's pick
    (`models_registry.selectors.step_version`); [] for a model that calls none or whose
    calls all serve. 409 naming the path when a call cannot be planned: not registered,
    failed its smoke test, its model serving other versions there (never replaced as a side
    effect), busy, or two calls asking one model at two versions."""
    served = selectors.desired_state(cluster=cluster)
    planned: list[ModelVersion] = []

    def refuse(path: list[str], why: str) -> DeploymentError:
        return DeploymentError(
            f"{version.model.name} v{version.version} cannot be deployed on {cluster.name} with "
            f"what it calls: {' → '.join(path)}: {why}",
            status=409,
            field="version",
        )

    def visit(caller: ModelVersion, path: list[str], names: list[str]) -> None:
        if len(path) > MAX_GRAPH_DEPTH:
            raise refuse(path, f"calls nested more than {MAX_GRAPH_DEPTH} deep.")
        for step in model_calls(caller.config_json):
            here = [*path, str(step)]
            chosen = next((v for v in planned if v.model.name == step.model), None)
            if chosen is not None:
                if not serves_step(step, [chosen.version]):
                    raise refuse(here, f"another call needs v{chosen.version} of it.")
                continue
            serving = served.get(step.model, [])
            if serves_step(step, serving):
                continue
            if serving:
                listed = ", ".join(f"v{n}" for n in serving)
                raise refuse(
                    here,
                    f"{step.model} serves {listed} there; deploy {step} first if it "
                    "should replace them.",
                )
            if step.model in names:
                raise refuse(here, "the graph calls itself.")
            found = registry_selectors.step_version(step=step)
            if found is None:
                raise refuse(here, "no such version is registered.")
            if found.status == ModelVersion.Status.SMOKE_FAILED:
                raise refuse(here, f"v{found.version} failed its smoke test.")
            refuse_if_busy(cluster, found.model)
            visit(found, here, [*names, step.model])
            planned.append(found)

    visit(version, [f"{version.model.name} v{version.version}"], [version.model.name])
    return planned


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
    *,
    cluster: TritonCluster,
    version: ModelVersion | None,
    actor,
    model: Model | None = None,
    with_callers: bool = False,
) -> Deployment:
    """Record a deploy (version given) or unload (version None) and queue it; audited. An
    unload `with_callers` unloads the models serving there that call it first (and theirs),
    each an unload of its own that the next waits for."""
    model = version.model if version is not None else model
    nodes = list(cluster.nodes.all())
    if not nodes:
        raise DeploymentError(f"Cluster {cluster.name} has no nodes.", field="cluster")
    with transaction.atomic():
        TritonCluster.objects.select_for_update().get(pk=cluster.pk)
        refuse_if_busy(cluster, model)
        callers = callers_planned(cluster, model) if version is None and with_callers else []
        going = {caller.name for caller in callers}
        refuse_if_graph_breaks(cluster, model, version, going=going)
        steps = calls_planned(cluster, version) if version is not None else []
        if version is not None and (reason := backend_refusal(cluster, [*steps, version])):
            raise DeploymentError(reason + ".", field="version")
        made: dict[str, Deployment] = {}
        for step in steps:  # steps before the ensembles calling them
            waits = _before(made, cluster, step.model, step)
            made[step.model.name] = _deployment_record(
                cluster, step.model, step, actor, nodes, waits
            )
        for caller in callers:  # callers' callers first
            waits = _before(made, cluster, caller, None)
            made[caller.name] = _deployment_record(cluster, caller, None, actor, nodes, waits)
        waits = _before(made, cluster, model, version)
        deployment = _deployment_record(cluster, model, version, actor, nodes, waits)
    return deployment


def _before(
    made: Mapping[str, Deployment],
    cluster: TritonCluster,
    model: Model,
    version: ModelVersion | None,
) -> list[Deployment]:
    """Of the deployments `made` in this plan, those this one waits for: a deploy's, of what
    its version calls (deployed first); an unload's, of what calls its model (unloaded
    first)."""
    if version is not None:
        names = [step.model for step in model_calls(version.config_json)]
    else:
        names = [caller.model.name for caller, _ in _callers(cluster, model)]
    return [made[name] for name in dict.fromkeys(names) if name in made]


def _callers(cluster: TritonCluster, model: Model) -> list[tuple[ModelVersion, Step]]:
    """The versions serving on `cluster` that call `model`, other models only."""
    return [
        (caller, step)
        for caller, step in selectors.callers_serving(cluster=cluster, model=model.name)
        if caller.model_id != model.pk
    ]


def callers_planned(cluster: TritonCluster, model: Model) -> list[Model]:
    """The models to unload before `model` on `cluster`: those serving there that call it,
    and those that call them, each after what calls it; each must be free to unload."""
    order: list[Model] = []

    def visit(called: Model, path: list[str]) -> None:
        if len(path) > MAX_GRAPH_DEPTH:
            raise DeploymentError(
                f"Unloading {model.name} with its callers: {' ← '.join(path)}: callers nested "
                f"more than {MAX_GRAPH_DEPTH} deep.",
                status=409,
            )
        for caller, _step in _callers(cluster, called):
            if caller.model in order or caller.model_id == model.pk:
                continue
            visit(caller.model, [*path, caller.model.name])
            if caller.model not in order:
                refuse_if_busy(cluster, caller.model)
                order.append(caller.model)

    visit(model, [model.name])
    return order


def _deployment_record(
    cluster: TritonCluster,
    model: Model,
    version: ModelVersion | None,
    actor,
    nodes: list,
    waits_for: list[Deployment],
) -> Deployment:
    """One deployment row, its nodes and its audit record, queued once committed unless it
    waits for others (`waits_for`: what it calls, deployed first, or what calls it, unloaded
    first)."""
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
    deployment.waits_for.set(waits_for)
    details: dict[str, Any] = {"previous": previous}
    if waits_for:
        details["waits_for"] = [d.pk for d in waits_for]
    audit_record(
        actor=actor,
        action=f"deployment.{deployment.kind}_requested",
        obj=deployment,
        details=details,
    )
    if not waits_for:
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
        # Those waiting for it run now (or fail unrun, when it failed).
        for waiting in deployment.waited_by.filter(status=Deployment.Status.PENDING):
            transaction.on_commit(lambda pk=waiting.pk: _enqueue(pk))
    return deployment


def deployment_blocked(deployment: Deployment) -> str | None:
    """Why a pending deployment may not run yet: "" when every deployment it waits for
    succeeded (or it waits for none), None while one is still pending or running, else
    the failure that stops it for good (one failed)."""
    before = list(deployment.waits_for.select_related("model", "version"))
    failed = [d for d in before if d.status == Deployment.Status.FAILED]
    if failed:
        return "; ".join(
            f"Not run: deployment {d.pk} ({d}) it waited for failed: {d.error}" for d in failed
        )
    if any(not d.is_finished for d in before):
        return None
    return ""


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
