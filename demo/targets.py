"""Where the demo's traffic goes: every serving model of a cluster except the ghost."""

from __future__ import annotations

from demo.traffic import TrafficTarget, check_loopback, request_body
from deployments.models import TritonCluster
from deployments.selectors import desired_state
from integrations.triton.client import TritonClient
from models_registry.models import Model

# A model with this tag is served but never called by demo traffic (a "ghost").
NO_DEMO_TRAFFIC_TAG = "no-demo-traffic"


def demo_targets(*, cluster: TritonCluster) -> list[TrafficTarget]:
    """Traffic targets for every serving model of a cluster: through its router when it has
    a URL (unversioned, as clients call), else at each node for each serving version.
    Models tagged NO_DEMO_TRAFFIC_TAG get none (the demo's ghost for cost reports)."""
    nodes = list(cluster.nodes.all())
    desired = desired_state(cluster=cluster)
    quiet = Model.objects.filter(name__in=list(desired), tags__contains=[NO_DEMO_TRAFFIC_TAG])
    for name in quiet.values_list("name", flat=True):
        desired.pop(name)
    if not nodes or not desired:
        return []
    with TritonClient(nodes[0].http_url, nodes[0].grpc_url or None, timeout_s=5) as client:
        bodies = {m: request_body(client.model_config(m)) for m in desired}
    router = (cluster.router or {}).get("url", "")
    if router:
        base = f"http://{check_loopback(router)}"
        return [TrafficTarget(base, m, "", body) for m, body in bodies.items()]
    return [
        TrafficTarget(node.http_url, model, str(version), bodies[model])
        for model, versions in desired.items()
        for version in versions
        for node in nodes
    ]
