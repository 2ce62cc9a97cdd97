"""The world most release tests start from: a team `fraud` owning `risk_score` with v1 and v2
registered, a production cluster `prod` whose nginx router is never started here, v1 serving
there, and one node that is never contacted (nothing listens on 127.0.0.1:9)."""

import io

from deployments.services import cluster_create, node_create, serving_state_set
from models_registry.services import model_create, model_version_register, team_create
from tests.registry.archives import example_entries, tar_gz


def release_world(make_user, **cluster_fields) -> dict:
    """{"ada", "rita", "model", "versions", "cluster"}; `cluster_fields` go to cluster_create."""
    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    versions = [
        model_version_register(
            model=model, actor=ada, archive=io.BytesIO(tar_gz(example_entries("risk_score", v)))
        )
        for v in (1, 2)
    ]
    cluster = cluster_create(
        actor=rita,
        name="prod",
        environment="production",
        router={"driver": "nginx", "listen": "127.0.0.1:1"},
        **cluster_fields,
    )
    serving_state_set(cluster=cluster, model=model, versions=[versions[0]])
    node_create(cluster=cluster, actor=rita, name="n1", http_url="http://127.0.0.1:9")
    return {"ada": ada, "rita": rita, "model": model, "versions": versions, "cluster": cluster}


def release_world_with_staging(make_user) -> dict:
    """release_world plus `staging` (v1 serving, one node never contacted, its router never
    started) and remy, a second release manager."""
    world = release_world(make_user)
    staging = cluster_create(actor=world["rita"], name="staging", environment="staging",
                             router={"driver": "nginx", "listen": "127.0.0.1:2"})  # fmt: skip
    serving_state_set(cluster=staging, model=world["model"], versions=[world["versions"][0]])
    node_create(cluster=staging, actor=world["rita"], name="s1", http_url="http://127.0.0.1:9")
    world["remy"] = make_user("remy", role="release-managers")
    return world
