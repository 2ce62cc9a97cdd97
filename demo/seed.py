"""The demo's data: the local cluster and its nodes, the example models, first deployments.

Every write goes through the product services, so the demo's rows are audited like any other.
"""

import io
import tarfile

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from demo.benchmark import demo_benchmark_seed
from demo.ghost import demo_ghost_seed
from deployments.models import TritonCluster
from deployments.services import (
    DeploymentError,
    cluster_create,
    cluster_update,
    deployment_create,
    node_create,
    node_remove,
    serving_versions,
)
from integrations.triton.model_config.graph import ensemble_steps
from models_registry.models import Model, Team
from models_registry.services import (
    Provenance,
    alias_set,
    model_create,
    model_version_register,
    team_create,
    team_member_add,
)

# The algorithm user writes the demo teams' models (team ownership: docs/SECURITY.md).
DEMO_TEAM_MEMBERS = ("ada",)
EXAMPLES = settings.BASE_DIR / "examples" / "model_repository"
DEMO_MODELS = (
    # (model, team, description, tags, sla, [(variant folder, label, notes)])
    (
        "risk_score",
        "fraud",
        "Fraud risk score for a card transaction (128 features).",
        ["fraud", "tabular"],
        {"p99_latency_ms": 25, "min_success_rate": 99.5, "max_queue_ms": 10},
        [
            (1, "v2024.05.01", "logistic regression"),
            (2, "v2024.06.12", "two-layer network"),
            (3, "v2024.07.02-faulty", "FAULTY on purpose: fails ~21% of requests"),
            (4, "v2024.07.09-slow", "SLOW on purpose: about 5x the latency"),
        ],
    ),
    (
        "fraud_gate",
        "fraud",
        "Approve, review or decline a transaction from risk_score (a BLS model calling it).",
        ["fraud", "bls"],
        {"p99_latency_ms": 40, "min_success_rate": 99.5},
        [(1, "v1", "approve below 0.3, decline above 0.8")],
    ),
    (
        "ticket_router",
        "support",
        "Routes support tickets to a queue.",
        ["nlp", "text"],
        {"p99_latency_ms": 50, "min_success_rate": 99.0},
        [(1, "v1", "bag of words")],
    ),
    # The support pipeline: an ensemble of ticket_clean -> ticket_router -> ticket_priority.
    # Deployed alone, it brings its steps (deployments/services.py `calls_planned`).
    (
        "ticket_clean",
        "support",
        "Cleans a ticket's text for the classifier (the support pipeline's first step).",
        ["nlp", "text", "pipeline-step"],
        {"p99_latency_ms": 20, "min_success_rate": 99.0},
        [(1, "v1", "quotes, signatures, links and addresses dropped")],
    ),
    (
        "ticket_priority",
        "support",
        "A ticket's queue and priority from its label (the support pipeline's last step).",
        ["nlp", "pipeline-step"],
        {"p99_latency_ms": 20, "min_success_rate": 99.0},
        [(1, "v1", "unsure labels go to triage")],
    ),
    (
        "ticket_triage",
        "support",
        "The support pipeline: ticket text in, queue and priority out (a Triton ensemble).",
        ["nlp", "text", "ensemble"],
        {"p99_latency_ms": 80, "min_success_rate": 99.0},
        [(1, "v1", "ticket_clean -> ticket_router -> ticket_priority")],
    ),
)


# Registered (its smoke test traces its call to risk_score) but not served: releases refuse a
# model that something serving on the cluster calls, and the demo's releases are risk_score's.
DEMO_NOT_SERVED = {"fraud_gate"}

SMOKE_CLUSTER = "local-smoke"
SMOKE_HOURLY_COST = "3.00"


def _archive(model: str, variant: int) -> io.BytesIO:
    buf = io.BytesIO()
    root = EXAMPLES / model
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(root / "config.pbtxt", arcname="config.pbtxt")
        for path in sorted((root / str(variant)).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                tar.add(path, arcname=f"{variant}/{path.relative_to(root / str(variant))}")
    buf.seek(0)
    return buf


def demo_cluster_register(
    *, base_port: int, nodes: int, actor, key_ref: str = ""
) -> tuple[TritonCluster, list]:
    """The local demo cluster and its nodes (router and node URLs follow the ports, the node
    key reference this run's key file); what could not be done, as lines for the terminal."""
    with transaction.atomic():  # run_router starts once the cluster exists: nodes included
        cluster = _demo_cluster(base_port=base_port, actor=actor, key_ref=key_ref)
        lines = [
            demo_node_register(cluster, name=f"node{i + 1}", port=base_port + 3 * i, actor=actor)
            for i in range(nodes)
        ]
    return cluster, [line for line in lines if line]


def _demo_cluster(*, base_port: int, actor, key_ref: str) -> TritonCluster:
    router = {
        "driver": "nginx",
        "listen": f"127.0.0.1:{base_port + 80}",
        "url": f"http://127.0.0.1:{base_port + 80}",
        "grpc_listen": f"127.0.0.1:{base_port + 81}",  # gRPC passed through, not split
    }
    return demo_cluster_ensure(
        name="local", environment="staging", router=router, actor=actor, key_ref=key_ref
    )


def demo_cluster_ensure(
    *, name: str, environment: str, router: dict, actor, key_ref: str
) -> TritonCluster:
    """A demo cluster with this run's router address and node key reference, created (CPU
    nodes at 0.50 an hour, files in the load request) or brought up to date."""
    cluster = TritonCluster.objects.filter(name=name).first()
    if cluster is None:
        return cluster_create(
            actor=actor,
            name=name,
            environment=environment,
            push_mode="upload",
            router=router,
            metrics={"source": "scrape"},
            gpu_type="CPU only",
            node_hourly_cost="0.50",
            api_key_ref=key_ref,
        )
    if cluster.router != router:  # ports changed since the last demo
        cluster = cluster_update(cluster=cluster, actor=actor, router=router)
    if cluster.api_key_ref != key_ref or cluster.api_key_ciphertext:
        cluster = cluster_update(cluster=cluster, actor=actor, api_key_ref=key_ref)
    return cluster


def demo_node_register(cluster: TritonCluster, *, name: str, port: int, actor) -> str:
    urls = {
        "http_url": f"http://127.0.0.1:{port}",
        "grpc_url": f"127.0.0.1:{port + 1}",
        "metrics_url": f"http://127.0.0.1:{port + 2}/metrics",
    }
    node = cluster.nodes.filter(name=name).first()
    if node is not None and all(getattr(node, k) == v for k, v in urls.items()):
        return ""
    try:
        if node is not None:  # ports changed since the last demo: the node is a new one
            node_remove(node=node, actor=actor)
        node_create(cluster=cluster, actor=actor, name=name, **urls)
    except DeploymentError as exc:
        return f"warning: {name} keeps its old addresses: {exc.message}"
    return ""


def demo_models_register(*, actor) -> list:
    """Register the example models once; returns the versions to deploy first."""
    first = []
    for name, team, description, tags, sla, variants in DEMO_MODELS:
        team_obj = Team.objects.filter(name=team).first() or team_create(name=team, actor=actor)
        for member in DEMO_TEAM_MEMBERS:
            if get_user_model().objects.filter(username=member).exists():
                team_member_add(team=team_obj, username=member, actor=actor)
        model = Model.objects.filter(name=name).first()
        if model is None:
            model = model_create(
                name=name, team=team, description=description, tags=tags, sla=sla, actor=actor
            )
        if not model.versions.exists():
            for variant, label, notes in variants:
                model_version_register(
                    model=model,
                    archive=_archive(name, variant),
                    actor=actor,
                    provenance=Provenance(label=label, notes=notes),
                )
        v1 = model.versions.get(version=1)
        if not model.aliases.filter(name="production").exists():
            alias_set(model=model, name="production", version=v1, actor=actor)
        first.append(v1)
    return first


def demo_smoke_cluster_register(*, port: int, actor, key_ref: str = "") -> list[str]:
    """The demo's smoke cluster: staging, one node, never deployed to, so smoke tests of new
    versions run there and not beside the served models (docs/SECURITY.md)."""
    cluster = TritonCluster.objects.filter(name=SMOKE_CLUSTER).first()
    if cluster is None:
        cluster = cluster_create(
            actor=actor,
            name=SMOKE_CLUSTER,
            environment="staging",
            push_mode="upload",
            router={"driver": "none"},
            metrics={"source": "scrape"},
            gpu_type="CPU only",
            # Dearer than the served nodes, so that the seconds the demo's benchmark computes
            # show in cents under Benchmark (demo/benchmark.py); its idle time shows too.
            node_hourly_cost=SMOKE_HOURLY_COST,
            api_key_ref=key_ref,
        )
    elif cluster.api_key_ref != key_ref or cluster.api_key_ciphertext:  # a new run's key file
        cluster = cluster_update(cluster=cluster, actor=actor, api_key_ref=key_ref)
    line = demo_node_register(cluster, name="smoke1", port=port, actor=actor)
    return [line] if line else []


def demo_cluster_seed(*, base_port: int, nodes: int = 2, key_ref: str = "") -> list[str]:
    """The clusters with this run's ports, before the router and traffic start reading them;
    the smoke cluster's node follows the served cluster's `nodes`."""
    admin = get_user_model().objects.get(username="admin")
    register = demo_cluster_register
    lines = register(base_port=base_port, nodes=nodes, actor=admin, key_ref=key_ref)[1]
    smoke_port = base_port + 3 * nodes
    return lines + demo_smoke_cluster_register(port=smoke_port, actor=admin, key_ref=key_ref)


def demo_deploy_once(cluster: TritonCluster, version, *, actor) -> str:
    """Deploy `version` where nothing of its model serves yet; what was done, as a line for
    the terminal ('' when it serves already)."""
    if serving_versions(cluster=cluster, model=version.model):
        return ""
    try:
        deployment_create(cluster=cluster, version=version, actor=actor)
    except DeploymentError as exc:
        return f"not deployed on {cluster.name}: {exc.message}"
    return f"deploying {version.model.name} v{version.version} on {cluster.name}"


def demo_seed(*, base_port: int, nodes: int = 2, key_ref: str = "") -> list[str]:
    """Cluster, example models and first deployments for `make demo`; safe to run again."""
    admin = get_user_model().objects.get(username="admin")
    cluster, lines = demo_cluster_register(
        base_port=base_port, nodes=nodes, actor=admin, key_ref=key_ref
    )
    lines += demo_smoke_cluster_register(port=base_port + 3 * nodes, actor=admin, key_ref=key_ref)
    first = demo_models_register(actor=admin)
    # A step of an ensemble is deployed with it, before it.
    steps = {step.model for version in first for step in ensemble_steps(version.config_json)}
    for version in first:
        name = version.model.name
        if name in steps or name in DEMO_NOT_SERVED:
            continue
        lines.append(demo_deploy_once(cluster, version, actor=admin))
    lines += demo_benchmark_seed(cluster_name=SMOKE_CLUSTER, actor=admin)
    return [line for line in lines if line] + demo_ghost_seed(cluster=cluster, actor=admin)
