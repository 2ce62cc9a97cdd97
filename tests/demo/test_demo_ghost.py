"""`make demo` serves a ghost for the cost reports: a model demo traffic never calls."""

import uuid

import pytest
from django.db import transaction

from demo.ghost import GHOST_MODEL, demo_ghost_seed
from demo.targets import NO_DEMO_TRAFFIC_TAG, demo_targets
from deployments.models import Deployment
from deployments.services import serving_state_set
from models_registry.models import Model
from models_registry.services import team_create
from tests.telemetry.live import db_cluster, load_example, unload

pytestmark = pytest.mark.django_db


def test_demo_registers_and_deploys_the_ghost_once(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    admin = make_user("admin", superuser=True)
    team_create(name="fraud", actor=admin)
    cluster = db_cluster("local", [], node_hourly_cost="0.50")
    cluster.nodes.create(name="node1", http_url="http://127.0.0.1:9")  # never called here
    lines = demo_ghost_seed(cluster=cluster, actor=admin)
    assert lines and "ghost" in lines[0], lines
    model = Model.objects.get(name=GHOST_MODEL)
    assert NO_DEMO_TRAFFIC_TAG in model.tags
    assert model.versions.get().validation.get("errors", []) == []
    assert Deployment.objects.filter(model=model, cluster=cluster).count() == 1
    demo_ghost_seed(cluster=cluster, actor=admin)
    assert model.versions.count() == 1  # run again: nothing new registered


@pytest.mark.triton
def test_demo_traffic_never_calls_a_model_tagged_as_the_ghost(triton_cluster, make_user):
    ada = make_user("ada", role="algorithm")
    team = team_create(name="fraud", actor=ada)
    suffix = uuid.uuid4().hex[:6]
    busy = Model.objects.create(name=f"busy_{suffix}", team=team)
    quiet = Model.objects.create(name=f"quiet_{suffix}", team=team, tags=[NO_DEMO_TRAFFIC_TAG])
    cluster = db_cluster(f"c-{suffix}", triton_cluster.nodes)
    try:
        for model in (busy, quiet):
            load_example(triton_cluster.nodes, example="risk_score", name=model.name, versions=[1])
            version = model.versions.create(
                version=1, label="v1", config_text="", config_json={}, manifest={},
                digest="x" * 64, size_bytes=0,
            )  # fmt: skip
            with transaction.atomic():
                serving_state_set(cluster=cluster, model=model, versions=[version])
        targets = demo_targets(cluster=cluster)
        assert {t.model for t in targets} == {busy.name}
    finally:
        for model in (busy, quiet):
            unload(triton_cluster.nodes, model.name)
