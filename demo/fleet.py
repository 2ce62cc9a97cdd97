"""The demo's fleet: beside `local`, two more local clusters, `eu` and `us`, each with one
Triton node and its own nginx router, serving risk_score v1 under steady traffic; and a
release plan example that walks risk_score v2 through eu, then us, then local, waiting for a
release manager's approval before its first and its last wave (docs/RELEASE_PLANS.md).

Ports: after the local cluster's nodes and the smoke node, 3 a node (HTTP, gRPC, metrics);
the routers on base + 82 and base + 83 (the local router has + 80 and + 81).
"""

from django.db import transaction

from accounts.errors import ApplicationError
from demo.seed import demo_cluster_ensure, demo_deploy_once, demo_node_register
from deployments.models import TritonCluster
from deployments.services import (
    serving_versions,
)
from models_registry.models import Model, ModelVersion
from plans.models import ReleasePlan
from plans.services import plan_create

FLEET_CLUSTERS = ("eu", "us")
FLEET_MODEL = "risk_score"
# Requests a second through each fleet router: enough for a step's analysis in 20 s at 25 %.
FLEET_RPS = 10
# Each wave's release: a short canary, so the example walks through in a few minutes.
PLAN_RELEASE = {"steps": [25, 50, 100], "step_interval_s": 20}
PLAN_BAKE_S = 30


def fleet_node_port(base_port: int, nodes: int, index: int) -> int:
    """The HTTP port of fleet cluster `index`'s node (`nodes`: the local cluster's, then
    the smoke node)."""
    return base_port + 3 * (nodes + 1 + index)


def fleet_router_port(base_port: int, index: int) -> int:
    return base_port + 82 + index


def demo_fleet_register(*, base_port: int, nodes: int, actor, key_ref: str = "") -> list[str]:
    """The fleet's clusters and nodes with this run's ports, before their routers start."""
    lines = []
    for index, name in enumerate(FLEET_CLUSTERS):
        with transaction.atomic():  # the router starts once the cluster has its node
            port = fleet_router_port(base_port, index)
            router = {"driver": "nginx", "listen": f"127.0.0.1:{port}",
                      "url": f"http://127.0.0.1:{port}"}  # fmt: skip
            cluster = demo_cluster_ensure(name=name, environment="production", router=router,
                                          actor=actor, key_ref=key_ref)  # fmt: skip
            node_port = fleet_node_port(base_port, nodes, index)
            lines.append(demo_node_register(cluster, name=f"{name}1", port=node_port, actor=actor))
    return [line for line in lines if line]


def demo_fleet_deploy(*, actor) -> list[str]:
    """risk_score v1 on every fleet cluster where nothing of it serves yet."""
    v1 = ModelVersion.objects.filter(model__name=FLEET_MODEL, version=1).first()
    if v1 is None:
        return [f"fleet: {FLEET_MODEL} v1 is not registered"]
    clusters = TritonCluster.objects.filter(name__in=FLEET_CLUSTERS).order_by("name")
    lines = [demo_deploy_once(cluster, v1, actor=actor) for cluster in clusters]
    return [line for line in lines if line]


def demo_fleet_serving() -> bool:
    """Whether risk_score serves on every fleet cluster (its deployments done)."""
    clusters = list(TritonCluster.objects.filter(name__in=FLEET_CLUSTERS))
    model = Model.objects.filter(name=FLEET_MODEL).first()
    if model is None or len(clusters) != len(FLEET_CLUSTERS):
        return False
    return all(serving_versions(cluster=c, model=model) for c in clusters)


def demo_plan_seed(*, actor, console_url: str) -> list[str]:
    """The plan example, once: risk_score v2 through eu (after an approval), us, then local
    (after another); its author is `actor`, so any demo release manager may approve."""
    if ReleasePlan.objects.exists():
        return []
    candidate = ModelVersion.objects.filter(model__name=FLEET_MODEL, version=2).first()
    if candidate is None:
        return [f"plan example: {FLEET_MODEL} v2 is not registered"]
    waves = [
        {"clusters": [name], "release": dict(PLAN_RELEASE), "bake_s": PLAN_BAKE_S,
         "approval": index == 0}
        for index, name in enumerate(FLEET_CLUSTERS)
    ] + [{"clusters": ["local"], "release": dict(PLAN_RELEASE), "approval": True}]  # fmt: skip
    try:
        plan = plan_create(candidate=candidate, waves=waves, actor=actor, on_failure="rollback")
    except ApplicationError as exc:
        return [f"plan example not started: {exc.message}"]
    route = " -> ".join(w["clusters"][0] for w in waves)
    return [
        f"release plan example: {FLEET_MODEL} v2 through {route}; a release manager approves "
        f"it at {console_url.rstrip('/')}/plans/{plan.pk}/"
    ]
