"""Demo-only helpers for `make demo`: users per role with fresh, printed passwords."""

import json
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

DEMO_USERS = (
    ("ada", "algorithm", "algorithm team"),
    ("rita", "release-managers", "release manager"),
    ("max", "managers", "manager"),
    ("admin", None, "superuser"),
)


def demo_logins_path() -> Path:
    return settings.SWITCHYARD_VAR_DIR / "demo" / "logins.json"


@transaction.atomic
def demo_users_create() -> list[dict]:
    """Create or reset one user per role (and a superuser); returns their new passwords."""
    User = get_user_model()
    logins = []
    for username, group, role in DEMO_USERS:
        password = secrets.token_urlsafe(9)
        user, _ = User.objects.get_or_create(username=username)
        user.set_password(password)
        user.is_superuser = user.is_staff = group is None
        user.save()
        user.groups.set([Group.objects.get_or_create(name=group)[0]] if group else [])
        logins.append({"username": username, "password": password, "role": role})
    path = demo_logins_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(logins, indent=1))
    path.chmod(0o600)
    return logins


def demo_logins() -> list[dict]:
    return json.loads(demo_logins_path().read_text())


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
        "ticket_router",
        "support",
        "Routes support tickets to a queue.",
        ["nlp", "text"],
        {"p99_latency_ms": 50, "min_success_rate": 99.0},
        [(1, "v1", "bag of words")],
    ),
)


def _archive(model: str, variant: int):
    import io
    import tarfile

    buf = io.BytesIO()
    root = EXAMPLES / model
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(root / "config.pbtxt", arcname="config.pbtxt")
        for path in sorted((root / str(variant)).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                tar.add(path, arcname=f"{variant}/{path.relative_to(root / str(variant))}")
    buf.seek(0)
    return buf


def demo_cluster_register(*, base_port: int, nodes: int, actor):
    """The local demo cluster and its nodes (URLs refreshed when the ports changed)."""
    from django.db import transaction

    with transaction.atomic():  # run_router starts once the cluster exists: nodes included
        return _demo_cluster_register(base_port=base_port, nodes=nodes, actor=actor)


def _demo_cluster_register(*, base_port: int, nodes: int, actor):
    from deployments.models import TritonCluster, TritonNode
    from deployments.services import cluster_create, node_create

    router = {
        "driver": "nginx",
        "listen": f"127.0.0.1:{base_port + 80}",
        "url": f"http://127.0.0.1:{base_port + 80}",
    }
    cluster = TritonCluster.objects.filter(name="local").first() or cluster_create(
        actor=actor,
        name="local",
        environment="staging",
        push_mode="upload",
        router=router,
        metrics={"source": "scrape"},
        gpu_type="CPU only",
        node_hourly_cost="0.50",
    )
    if cluster.router != router:  # ports changed since the last demo
        TritonCluster.objects.filter(pk=cluster.pk).update(router=router)
        cluster.router = router
    for i in range(nodes):
        port = base_port + 3 * i
        urls = {
            "http_url": f"http://127.0.0.1:{port}",
            "grpc_url": f"127.0.0.1:{port + 1}",
            "metrics_url": f"http://127.0.0.1:{port + 2}/metrics",
        }
        name = f"node{i + 1}"
        if not TritonNode.objects.filter(cluster=cluster, name=name).update(**urls):
            node_create(cluster=cluster, actor=actor, name=name, **urls)
    return cluster


def demo_models_register(*, actor) -> list:
    """Register the example models once; returns the versions to deploy first."""
    from models_registry.models import Model, Team
    from models_registry.services import (
        Provenance,
        alias_set,
        model_create,
        model_version_register,
        team_create,
        team_member_add,
    )

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


def demo_seed(*, base_port: int, nodes: int = 2) -> list[str]:
    """Cluster, example models and first deployments for `make demo`; safe to run again."""
    from deployments.services import DeploymentError, deployment_create, serving_versions

    admin = get_user_model().objects.get(username="admin")
    cluster = demo_cluster_register(base_port=base_port, nodes=nodes, actor=admin)
    lines = []
    for version in demo_models_register(actor=admin):
        if serving_versions(cluster=cluster, model=version.model):
            continue
        try:
            deployment_create(cluster=cluster, version=version, actor=admin)
            lines.append(f"deploying {version.model.name} v{version.version} on {cluster.name}")
        except DeploymentError as exc:
            lines.append(f"not deployed: {exc.message}")
    from console.cost_demo import demo_ghost_seed

    return lines + demo_ghost_seed(cluster=cluster, actor=admin)
