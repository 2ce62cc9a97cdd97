"""Where the demo's traffic goes: every serving model of a cluster except the ghost."""

from __future__ import annotations

import logging

from demo.traffic import TrafficTarget, check_loopback, request_body
from deployments.models import TritonCluster
from deployments.push import client_for
from deployments.selectors import desired_state
from integrations.triton.client import TritonClient
from integrations.triton.errors import TritonError
from models_registry.models import Model

# A model with this tag is served but never called by demo traffic (a "ghost").
NO_DEMO_TRAFFIC_TAG = "no-demo-traffic"
log = logging.getLogger(__name__)


def demo_targets(*, cluster: TritonCluster) -> list[TrafficTarget]:
    """Traffic targets for every serving model of a cluster: through its router when it has
    a URL (unversioned, as clients call), else at each node for each serving version.
    Models tagged NO_DEMO_TRAFFIC_TAG get none (the demo's ghost for cost reports)."""
    nodes = list(cluster.nodes.all())
    desired = {m: v for m, v in desired_state(cluster=cluster).items() if v}  # [] = unloaded
    quiet = Model.objects.filter(name__in=list(desired), tags__contains=[NO_DEMO_TRAFFIC_TAG])
    for name in quiet.values_list("name", flat=True):
        desired.pop(name)
    if not nodes or not desired:
        return []
    with client_for(nodes[0]) as client:
        bodies = {m: body for m in desired if (body := _body(client, m)) is not None}
    router = (cluster.router or {}).get("url", "")
    if router:
        base = f"http://{check_loopback(router)}"
        return [TrafficTarget(base, m, "", body) for m, body in bodies.items()]
    return [
        TrafficTarget(node.http_url, model, str(version), bodies[model])
        for model in bodies
        for version in desired[model]
        for node in nodes
    ]


def _body(client: TritonClient, model: str) -> bytes | None:
    """A request body from the model's config on the node; None while it is not loaded
    there (being loaded, or unloaded since): no traffic for it this time."""
    try:
        return request_body(client.model_config(model))
    except TritonError as exc:
        log.info("no demo traffic to %s for now: %s", model, exc)
        return None
