"""Live telemetry pages: a cluster's and a model's live charts (websocket) and history
ranges (the metrics API over rollups)."""

import hashlib
import time

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from core.shared import shared_value
from deployments import selectors as deployment_selectors
from models_registry import selectors as registry_selectors
from models_registry.models import Model
from telemetry import selectors as telemetry_selectors


def _slas(names) -> dict[str, dict]:
    return {m.name: m.sla for m in Model.objects.filter(name__in=list(names))}


TRAFFIC_CHARTS = [(c, 260, True) for c in ("chart-rate", "chart-success", "chart-latency")]
TRAFFIC_CHARTS += [("chart-queue", 260, True)]
NODE_CHARTS = [(c, 240, False) for c in ("chart-cpu", "chart-gpu", "chart-mem")]
TOKENS_CHART = ("chart-tokens", 260, True)


def _opening(*, cluster: str = "", model: str = "", what: str) -> dict:
    """The recent past a live page opens with, and why a chart is empty, in words: read at
    most SWITCHYARD_PAGE_SHARE_S ago, once for everyone opening the same page (core/shared.py;
    the page's websocket brings every point after it)."""
    subject = f"cluster:{cluster}" if cluster else f"model:{model}"

    def compute() -> dict:
        now = time.time()
        history = telemetry_selectors.live_history(cluster=cluster, model=model, now=now)
        reasons = telemetry_selectors.live_empty_reasons(history=history, now=now, what=what)
        return {
            "now": now,
            "window_s": telemetry_selectors.LIVE_HISTORY_S,
            "initial": history,
            "empty": reasons,
        }

    key = f"console:live-opening:{hashlib.sha256(subject.encode()).hexdigest()[:32]}"
    return shared_value(key, compute, fresh_s=settings.SWITCHYARD_PAGE_SHARE_S)


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
        **_opening(cluster=cluster.name, what=f"a model on {cluster.name}"),
    }
    context = {
        "cluster": cluster,
        "nodes": cluster.nodes.all(),
        "desired": desired,
        "config": config,
        "charts": TRAFFIC_CHARTS + NODE_CHARTS,
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
        **_opening(model=model.name, what=f"{model.name} on any cluster"),
    }
    # A decoupled (streaming) model's page also charts its output tokens a second.
    streams = model.versions.filter(config_json__model_transaction_policy__decoupled=True)
    charts = TRAFFIC_CHARTS + ([TOKENS_CHART] if streams.exists() else [])
    context = {"model": model, "config": config, "charts": charts}
    return render(request, "console/telemetry/model_live.html", context)
