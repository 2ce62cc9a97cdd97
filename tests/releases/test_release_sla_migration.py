"""The migration that records a release's SLA fills it for releases made before it."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from deployments.models import TritonCluster
from models_registry.models import Model, ModelVersion, Team

BEFORE = [("releases", "0001_initial")]
AFTER = [("releases", "0002_release_sla")]


@pytest.mark.django_db(transaction=True)
def test_existing_releases_record_their_models_sla():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    # Only releases went back: the other apps' tables are current, so their models are too.
    team = Team.objects.create(name="fraud")
    model = Model.objects.create(
        name="risk_score", team=team, sla_p99_latency_ms=25, sla_min_success_rate=99.5
    )
    version = ModelVersion.objects.create(
        model=model, version=1, label="v1", config_json={}, manifest=[], digest="d", size_bytes=0
    )
    cluster = TritonCluster.objects.create(name="prod", environment="production")
    old = executor.loader.project_state(BEFORE).apps
    old.get_model("releases", "Release").objects.create(
        cluster_id=cluster.pk,
        model_id=model.pk,
        baseline_id=version.pk,
        candidate_id=version.pk,
        steps=[],
    )

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    release = executor.loader.project_state(AFTER).apps.get_model("releases", "Release")
    assert release.objects.get().sla == {
        "p99_latency_ms": 25.0,
        "min_success_rate": 99.5,
        "max_queue_ms": None,
        "min_throughput_rps": None,
    }


@pytest.fixture(autouse=True)
def _back_to_the_latest_migrations():
    """Back to the latest migrations, so later tests find every column (a failure too)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
