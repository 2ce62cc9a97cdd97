"""A staging cluster made of the session's real Triton nodes, users and example versions."""

import io

import pytest

from deployments.services import cluster_create, node_create
from models_registry.services import model_create, model_version_register, team_create
from tests.registry.archives import example_entries, tar_gz


def register_variant(model, user, variant: int):
    """risk_score example `variant` registered as a version of `model` (config name rewritten)."""
    entries = example_entries("risk_score", variant)
    config = entries[0][1].replace(b'name: "risk_score"', f'name: "{model.name}"'.encode())
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *entries[1:]]))
    return model_version_register(model=model, archive=archive, actor=user)


@pytest.fixture
def bench_world(triton_cluster, settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    rita = make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    staging = cluster_create(
        actor=rita,
        name="bench-staging",
        environment="staging",
        router={"driver": "none"},
        api_key=triton_cluster.node_key.value,  # benchmarks load with the cluster's own key
    )
    node = triton_cluster.nodes[0]
    node_create(
        cluster=staging,
        actor=rita,
        name=node.name,
        http_url=node.http_url,
        grpc_url=node.grpc_url,
        metrics_url=node.metrics_url,
    )
    return {"ada": ada, "rita": rita, "staging": staging, "node": node}


@pytest.fixture
def new_model(bench_world):
    def _make(name: str, **sla):
        return model_create(name=name, team="fraud", actor=bench_world["ada"], sla=sla or None)

    return _make
