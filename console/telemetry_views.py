"""Live telemetry pages: a cluster's and a model's live charts (websocket) and history
ranges (the metrics API over rollups)."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from deployments import selectors as deployment_selectors
from models_registry import selectors as registry_selectors
from models_registry.models import Model


def _slas(names) -> dict[str, dict]:
    return {m.name: m.sla for m in Model.objects.filter(name__in=list(names))}


@login_required
def cluster_live(request, name: str):
    cluster = deployment_selectors.cluster_get(name=name)
    if cluster is None:
        raise Http404(f"No cluster named '{name}'.")
    desired = deployment_selectors.desired_state(cluster=cluster)
    config = {
        "mode": "cluster",
        "ws": f"/ws/clusters/{cluster.name}/",
        "history": {"cluster": cluster.name},
        "sla": _slas(desired),
        "nodes": [n.name for n in cluster.nodes.all()],
    }
    context = {
        "cluster": cluster,
        "nodes": cluster.nodes.all(),
        "desired": desired,
        "config": config,
    }
    return render(request, "console/telemetry/cluster_live.html", context)


@login_required
def model_live(request, name: str):
    model = registry_selectors.model_get(name=name)
    if model is None:
        raise Http404(f"No model named '{name}'.")
    config = {
        "mode": "model",
        "ws": f"/ws/models/{model.name}/",
        "history": {"model": model.name},
        "sla": {model.name: model.sla},
        "nodes": [],
    }
    return render(request, "console/telemetry/model_live.html", {"model": model, "config": config})
