"""Reads of clusters, nodes, serving state and deployments (live reads from Triton included,
with short timeouts: they are cheap and the web process may make them)."""

from django.conf import settings
from django.db.models import Prefetch, QuerySet

from accounts.pagination import filtered
from core.rows import only_shown
from deployments import push
from deployments.models import (
    Deployment,
    DeploymentNode,
    DriftEvent,
    ServingState,
    ServingVersion,
    TritonCluster,
    TritonNode,
)
from integrations.concurrency import fan_out
from integrations.triton.errors import TritonError
from integrations.triton.model_config.graph import Step
from integrations.triton.restricted import answers_without_key
from models_registry.models import Model, ModelVersion
from models_registry.selectors import calls_among, model_callers


def cluster_list() -> QuerySet[TritonCluster]:
    return TritonCluster.objects.prefetch_related("nodes")


def cluster_get(*, name: str) -> TritonCluster | None:
    return TritonCluster.objects.prefetch_related("nodes").filter(name=name).first()


def desired_state(*, cluster: TritonCluster) -> dict[str, list[int]]:
    """{model name: [versions]} that must be loaded on every node of the cluster."""
    states = (
        ServingState.objects.filter(cluster=cluster)
        .select_related("model")
        .prefetch_related(
            Prefetch("serving_versions", ServingVersion.objects.select_related("version"))
        )
    )
    return {s.model.name: s.version_numbers() for s in states}


def callers_serving(*, cluster: TritonCluster, model: str) -> list[tuple[ModelVersion, Step]]:
    """The versions that must serve on `cluster` and call `model` (ensembles with a step on
    it, BLS models declaring it), each with that call (model_config/graph.py)."""
    serving = ModelVersion.objects.filter(serving__state__cluster=cluster)
    return model_callers(name=model, among=serving)


def callers_by_model(
    *, cluster: TritonCluster, ensembles_only: bool = False
) -> dict[str, list[str]]:
    """{model name: the names of the models serving on `cluster` that call it} (only the
    ensembles with `ensembles_only`: their requests pass the router as theirs)."""
    out: dict[str, set[str]] = {}
    serving = ModelVersion.objects.filter(serving__state__cluster=cluster)
    if ensembles_only:
        serving = serving.filter(config_json__platform="ensemble")
    for caller, step in calls_among(among=serving):
        if step.model != caller.model.name:
            out.setdefault(step.model, set()).add(caller.model.name)
    return {name: sorted(callers) for name, callers in out.items()}


def desired_states(*, clusters: list[TritonCluster]) -> dict[int, dict[str, list[int]]]:
    """desired_state of every cluster given, by cluster id, in three queries for all."""
    states = (
        ServingState.objects.filter(cluster__in=clusters)
        .select_related("model")
        .prefetch_related(
            Prefetch("serving_versions", ServingVersion.objects.select_related("version"))
        )
    )
    out: dict[int, dict[str, list[int]]] = {c.pk: {} for c in clusters}
    for s in states:
        out[s.cluster_id][s.model.name] = s.version_numbers()
    return out


def _node_live_status(node: TritonNode) -> dict:
    try:
        with push.client_for(node) as client:
            if not client.is_live():
                return {"reachable": False, "error": "not live", "loaded": {}}
            loaded = client.loaded_models()
            return {
                "reachable": True,
                "server_version": client.server_metadata().version,
                "loaded": {m: sorted(int(v) for v in vs) for m, vs in loaded.items()},
            }
    except TritonError as exc:
        return {"reachable": False, "error": str(exc), "loaded": {}}


def node_control_access(node: TritonNode) -> str:
    """Whether the node answers POST /v2/repository/index without a key (TritonNode.ControlAccess):
    `open` when it does, `restricted` when it refuses, `unknown` when it cannot tell."""
    answered = answers_without_key(node.http_url, timeout_s=settings.SWITCHYARD_TRITON_TIMEOUT_S)
    if answered is None:
        return TritonNode.ControlAccess.UNKNOWN
    return TritonNode.ControlAccess.OPEN if answered else TritonNode.ControlAccess.RESTRICTED


def nodes_live_status(nodes: list[TritonNode]) -> dict[int, dict]:
    """What each node answers now, by node id (every node asked at once, short timeouts)."""
    return fan_out(nodes, _node_live_status)


def cluster_status(*, cluster: TritonCluster) -> dict:
    """Per node: health, server version, what is loaded, and drift from the desired state,
    asked of every node now (the cluster page reads deployments/node_status.py instead)."""
    nodes = list(cluster.nodes.all())
    return status_of(cluster, nodes, nodes_live_status(nodes))


def status_of(cluster: TritonCluster, nodes: list[TritonNode], live: dict[int, dict]) -> dict:
    """cluster_status from what each node answered (`live`, by node id): drift against the
    desired state as it is now."""
    desired = desired_state(cluster=cluster)
    out = []
    for node in nodes:
        status = live[node.pk]
        loaded = status["loaded"]
        drift = {}
        if status["reachable"]:
            for model, versions in desired.items():
                have = loaded.get(model, [])
                if sorted(have) != versions:
                    drift[model] = {"desired": versions, "loaded": have}
        health = status.get("health") or ("up" if status["reachable"] else "down")
        out.append(
            {
                "name": node.name,
                "http_url": node.http_url,
                **status,
                "health": health,
                "drift": drift,
            }
        )
    return {"cluster": cluster.name, "desired": desired, "nodes": out}


def deployment_get(*, deployment_id: int) -> Deployment | None:
    return (
        Deployment.objects.select_related("cluster", "model", "version", "requested_by")
        .prefetch_related(
            Prefetch("nodes", DeploymentNode.objects.select_related("node")),
            Prefetch("waits_for", Deployment.objects.select_related("model")),
            Prefetch("waited_by", Deployment.objects.select_related("model")),
        )
        .filter(pk=deployment_id)
        .first()
    )


def deployments_recent(*, cluster: TritonCluster | None = None, limit: int = 20):
    qs = Deployment.objects.select_related("cluster", "model", "version", "requested_by")
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    return qs[:limit]


def drift_recent(*, cluster: TritonCluster, limit: int = 20) -> QuerySet[DriftEvent]:
    return DriftEvent.objects.filter(cluster=cluster).select_related("node")[:limit]


def model_live_where(*, model: Model) -> list[dict]:
    """Where each version of a model must serve: [{"cluster", "environment", "versions"}]."""
    states = (
        ServingState.objects.filter(model=model)
        .select_related("cluster")
        .prefetch_related(
            Prefetch("serving_versions", ServingVersion.objects.select_related("version"))
        )
    )
    return [
        {
            "cluster": s.cluster.name,
            "environment": s.cluster.environment,
            "versions": s.version_numbers(),
        }
        for s in states
        if s.version_numbers()
    ]


def deployment_list(**filters) -> QuerySet[Deployment]:
    """Deployments newest first, narrowed by `accounts.pagination.filtered`'s filters; of the
    objects each joins, only what a list shows (each node's part names its node itself)."""
    qs = Deployment.objects.select_related("cluster", "model", "version", "requested_by")
    listed = ("cluster__name", "model__name", "version__version", "requested_by__username")
    qs = only_shown(qs, *listed).prefetch_related(
        "nodes", Prefetch("waits_for", Deployment.objects.only("id"))
    )
    return filtered(qs, **filters)


def fleet_overview(*, drift_since) -> list[dict]:
    """Every cluster, production first: its nodes' health as reconcile last saw it, what
    it serves, and its drift events since `drift_since` (the release managers' home)."""
    clusters = TritonCluster.objects.prefetch_related("nodes").order_by("environment", "name")
    serving: dict[int, list[dict]] = {}
    states = ServingState.objects.select_related("model").prefetch_related(
        Prefetch("serving_versions", ServingVersion.objects.select_related("version"))
    )
    for s in states.order_by("model__name"):
        if s.version_numbers():
            entry = {"model": s.model.name, "versions": s.version_numbers(), "owner": s.owner}
            serving.setdefault(s.cluster_id, []).append(entry)
    drift: dict[int, list[DriftEvent]] = {}
    for event in DriftEvent.objects.filter(created_at__gte=drift_since).order_by("-created_at"):
        drift.setdefault(event.cluster_id, []).append(event)
    return [
        {
            "cluster": c,
            "nodes": list(c.nodes.all()),
            "nodes_up": sum(1 for n in c.nodes.all() if n.health == "up"),
            "serving": serving.get(c.pk, []),
            "drift": drift.get(c.pk, [])[:5],
            "drift_count": len(drift.get(c.pk, [])),
        }
        for c in clusters
    ]
