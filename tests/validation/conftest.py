"""A production cluster with an nginx router (never started here), a model with two
versions (v1 serving) and a release manager's API client."""

import io

import pytest
from rest_framework.test import APIClient

from deployments.services import cluster_create, node_create, serving_state_set
from models_registry.services import model_create, model_version_register, team_create
from tests.registry.archives import example_entries, tar_gz

BODY = {
    "cluster": "prod",
    "model": "risk_score",
    "candidate_version": 2,
    "steps": [10, 100],
    "step_interval_s": 5,
    "require_benchmark": False,
}


@pytest.fixture
def release_api(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
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
    )
    serving_state_set(cluster=cluster, model=model, versions=[versions[0]])
    node_create(cluster=cluster, actor=rita, name="n1", http_url="http://127.0.0.1:9")
    client = APIClient()
    client.force_authenticate(rita)
    return client
