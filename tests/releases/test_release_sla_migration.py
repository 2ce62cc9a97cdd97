"""The migration that records a release's SLA fills it for releases made before it."""

import pytest

from deployments.models import TritonCluster
from models_registry.models import Model, ModelVersion, Team
from tests.conftest import migrate_to

pytestmark = pytest.mark.usefixtures("latest_migrations_after")
BEFORE = [("releases", "0001_initial")]
AFTER = [("releases", "0002_release_sla")]


@pytest.mark.django_db(transaction=True)
def test_existing_releases_record_their_models_sla():
    old = migrate_to(BEFORE)
    # Only releases went back: the other apps' tables are current, so their models are too.
    team = Team.objects.create(name="fraud")
    model = Model.objects.create(
        name="risk_score", team=team, sla_p99_latency_ms=25, sla_min_success_rate=99.5
    )
    version = ModelVersion.objects.create(
        model=model, version=1, label="v1", config_json={}, manifest=[], digest="d", size_bytes=0
    )
    cluster = TritonCluster.objects.create(name="prod", environment="production")
    old.get_model("releases", "Release").objects.create(
        cluster_id=cluster.pk,
        model_id=model.pk,
        baseline_id=version.pk,
        candidate_id=version.pk,
        steps=[],
    )

    release = migrate_to(AFTER).get_model("releases", "Release")
    assert release.objects.get().sla == {
        "p99_latency_ms": 25.0,
        "min_success_rate": 99.5,
        "max_queue_ms": None,
        "min_throughput_rps": None,
    }
