"""Cluster pages: list, detail (nodes, loaded matrix, drift), deploy with live progress."""

from dataclasses import asdict

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import Role, user_has_role
from core.shared import shared_value
from deployments import selectors
from deployments.freezes import cluster_freeze_view
from deployments.node_status import cluster_status_refresh_request, cluster_status_stored
from deployments.prices import change_values, price_history
from deployments.services import DeploymentError, deployment_create, node_remove
from models_registry.models import Model
from models_registry.selectors import version_choices, version_chosen
from releases.inputs import AnalysisSettings
from releases.selectors import router_view, unrouted_recent
from releases.unrouted import UnroutedMeasure, percent


def _can_deploy(user) -> bool:
    return user_has_role(user, Role.RELEASE_MANAGERS.value)


def _cluster_or_404(name: str):
    cluster = selectors.cluster_get(name=name)
    if cluster is None:
        raise Http404(f"No cluster named '{name}'.")
    return cluster


@login_required
def cluster_list(request):
    found = list(selectors.cluster_list())
    desired = selectors.desired_states(clusters=found)
    clusters = [{"cluster": c, "desired": desired[c.pk]} for c in found]
    return render(request, "console/clusters/list.html", {"clusters": clusters})


def _matrix(status: dict) -> list[dict]:
    """Rows of (model, version) x node: loaded / missing (drift) / unexpected (drift)."""
    rows: dict[tuple[str, int], dict] = {}
    desired = status["desired"]
    for model, versions in desired.items():
        for version in versions:
            rows[(model, version)] = {"model": model, "version": version, "desired": True}
    for node in status["nodes"]:
        for model, versions in node["loaded"].items():
            for version in versions:
                rows.setdefault(
                    (model, version), {"model": model, "version": version, "desired": False}
                )
    for row in rows.values():
        row["cells"] = []
        for node in status["nodes"]:
            loaded = row["version"] in node["loaded"].get(row["model"], [])
            if not node["reachable"]:
                state = "unknown"
            elif loaded:
                state = "loaded" if row["desired"] or row["model"] not in desired else "extra"
            else:
                state = "missing" if row["desired"] else "absent"
            row["cells"].append(state)
    return sorted(rows.values(), key=lambda r: (r["model"], r["version"]))


# The unrouted share reads the router log's tail: a page opened by many people at once
# shares one reading for this long (a release start always measures afresh).
UNROUTED_PAGE_CACHE_S = 30


def _unrouted_for_page(cluster, models: list[str]) -> list[tuple[str, UnroutedMeasure]]:
    key = f"console:unrouted:{cluster.pk}:{','.join(sorted(models))}"

    def measure() -> list:
        # An ensemble's split requests reach its steps through it: routed for them too.
        via = selectors.callers_by_model(cluster=cluster, ensembles_only=True)
        found = sorted(unrouted_recent(cluster=cluster, models=models, via=via).items())
        # The cache holds JSON (audit/cache_json.py): plain fields, rebuilt when read.
        return [[model, asdict(m)] for model, m in found]

    found = _unrouted_from_cache(shared_value(key, measure, fresh_s=UNROUTED_PAGE_CACHE_S))
    return found if found is not None else _unrouted_from_cache(measure()) or []


def _unrouted_from_cache(value) -> list[tuple[str, UnroutedMeasure]] | None:
    """The cached rows as measures again; None (a miss) when absent or not of that shape."""
    if not isinstance(value, list):
        return None
    try:
        return [(str(model), UnroutedMeasure(**fields)) for model, fields in value]
    except (TypeError, ValueError):
        return None


PRICE_LABELS = {
    "node_hourly_cost": "nodes without a price of their own, an hour",
    "hourly_cost": "an hour",
    "gpu_hourly_cost": "a GPU-hour",
    "gpu_count": "GPUs",
    "execution_slots": "execution slots",
}
# The cluster page shows the latest price changes; the API pages the whole history.
PRICES_SHOWN = 20


def _price_rows(cluster) -> list[dict]:
    """The latest price changes in words: what each set (and what it replaced)."""
    rows = []
    for change in price_history(cluster=cluster)[:PRICES_SHOWN]:
        parts = []
        for key, value in change_values(change).items():
            old = change.before.get(key)
            if change.before and old == value:
                continue
            if not change.before and value is None:
                continue
            was = f"{old if old is not None else 'none'} → " if change.before else ""
            parts.append(f"{PRICE_LABELS[key]}: {was}{value if value is not None else 'none'}")
        rows.append(
            {
                "at": change.effective_at,
                "where": change.node_name or "cluster",
                "what": "; ".join(parts) or "the cluster price",
                "is_first": not change.before,
                "by": change.changed_by_username,
            }
        )
    return rows


@login_required
def cluster_detail(request, name):
    cluster = _cluster_or_404(name)
    # What the nodes answered in the background (deployments/node_status.py): no node call here.
    status = cluster_status_stored(cluster=cluster)
    if status["is_stale"]:
        cluster_status_refresh_request(cluster=cluster)
    recent = list(selectors.deployments_recent(cluster=cluster, limit=10))
    can_deploy = _can_deploy(request.user)
    matrix = _matrix(status)
    if can_deploy:  # an unload of a model others call offers to unload them first
        callers = selectors.callers_by_model(cluster=cluster)
        for row in matrix:
            row["callers"] = callers.get(row["model"], [])
    context = {
        "cluster": cluster,
        "status": status,
        "matrix": matrix,
        "drift": selectors.drift_recent(cluster=cluster),
        "router": router_view(cluster=cluster),
        # Per model: the traffic a release on this cluster would not protect.
        "unrouted": _unrouted_for_page(cluster, list(status["desired"])),
        "unrouted_window_min": round(settings.SWITCHYARD_UNROUTED_WINDOW_S / 60),
        "unrouted_limit": AnalysisSettings().max_unrouted_share,
        "unrouted_limit_percent": percent(AnalysisSettings().max_unrouted_share),
        "deployments": recent,
        "prices": _price_rows(cluster),
        "currency": settings.SWITCHYARD_CURRENCY,
        # The running one's per-node progress shows here too, not only where it started.
        "running_deployment": next((d for d in recent if not d.is_finished), None),
        "can_deploy": can_deploy,
        "deployable": version_choices() if can_deploy else [],  # only the form lists them
        **cluster_freeze_view(cluster.name),  # freezes, frozen, overrides
    }
    return render(request, "console/clusters/detail.html", context)


@login_required
@require_POST
def cluster_deploy(request, name):
    cluster = _cluster_for_release_managers(request, name, doing="Deploying")
    post = request.POST
    version = version_chosen(version_id=post.get("version_id", ""), typed=post.get("version", ""))
    if version is None:
        messages.error(request, "Choose a model version to deploy (or type one: model vN).")
        return redirect("console:cluster-detail", name=name)
    return _deployment_started(request, name, cluster=cluster, version=version)


@login_required
@require_POST
def cluster_unload(request, name, model):
    cluster = _cluster_for_release_managers(request, name, doing="Unloading")
    found = Model.objects.filter(name=model).first()
    if found is None:
        raise Http404(f"No model named '{model}'.")
    with_callers = request.POST.get("with_callers") == "1"
    return _deployment_started(
        request, name, cluster=cluster, version=None, model=found, with_callers=with_callers
    )


def _deployment_started(request, name: str, **create):
    """Record a deployment (or an unload) and show it; a refusal goes back to the cluster
    page in words."""
    try:
        deployment = deployment_create(actor=request.user, **create)
    except DeploymentError as exc:
        messages.error(request, exc.message)
        return redirect("console:cluster-detail", name=name)
    return redirect("console:deployment-detail", deployment_id=deployment.pk)


@login_required
@require_POST
def cluster_node_remove(request, name, node):
    cluster = _cluster_for_release_managers(request, name, doing="Removing a node")
    found = cluster.nodes.filter(name=node).first()
    if found is None:
        raise Http404(f"Cluster {name} has no node named '{node}'.")
    try:
        node_remove(node=found, actor=request.user)
    except DeploymentError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"{node} removed from {name}: nothing was unloaded from it, and the router stops "
            "sending to it within 10 s. Its deployment history stays.",
        )
    return redirect("console:cluster-detail", name=name)


def _cluster_for_release_managers(request, name: str, *, doing: str):
    """The cluster of a change only release managers make (403 for others, 404 unknown)."""
    if not _can_deploy(request.user):
        raise PermissionDenied(f"{doing} needs the release-managers role.")
    return _cluster_or_404(name)


def _deployment_or_404(deployment_id: int):
    deployment = selectors.deployment_get(deployment_id=deployment_id)
    if deployment is None:
        raise Http404(f"No deployment {deployment_id}.")
    return deployment


@login_required
def deployment_detail(request, deployment_id):
    deployment = _deployment_or_404(deployment_id)
    return render(request, "console/clusters/deployment.html", {"deployment": deployment})


@login_required
def deployment_progress(request, deployment_id):
    """The per-node progress fragment; htmx polls it until the deployment finishes."""
    deployment = _deployment_or_404(deployment_id)
    return render(request, "console/clusters/_deployment_progress.html", {"deployment": deployment})
