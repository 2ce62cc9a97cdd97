"""Safe retries: Idempotency-Key on POSTs that create work, and 409s for duplicates."""

import io
from datetime import timedelta

import psycopg
import pytest
from rest_framework.test import APIClient

from accounts import idempotency
from accounts.models import IdempotencyKey
from accounts.tasks import idempotency_keys_prune
from audit.models import AuditEvent
from deployments.models import TritonCluster
from deployments.services import cluster_create, serving_state_set
from models_registry.models import Model, ModelVersion, Team
from models_registry.services import model_create, model_version_register, team_create
from releases.models import Release
from tests.conftest import database_url
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def ada(make_user):
    return make_user("ada", role="algorithm")


def _post(client, path, body, key, **extra):
    return client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=key, **extra)


def test_a_retried_post_with_the_same_key_replays_the_answer_and_creates_nothing(ada):
    client = _client(ada)
    first = _post(client, "/api/v1/teams/", {"name": "fraud"}, "k-1")
    again = _post(client, "/api/v1/teams/", {"name": "fraud"}, "k-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Team.objects.filter(name="fraud").count() == 1
    assert AuditEvent.objects.filter(action="team.created").count() == 1

    model = {"name": "risk_score", "team": "fraud"}
    assert _post(client, "/api/v1/models/", model, "k-2").status_code == 201
    replay = _post(client, "/api/v1/models/", model, "k-2")
    assert replay.status_code == 201 and replay.json()["name"] == "risk_score"
    assert Model.objects.count() == 1


def test_the_same_key_with_a_different_body_is_a_409_and_keys_are_per_user(ada, make_user):
    client = _client(ada)
    assert _post(client, "/api/v1/teams/", {"name": "fraud"}, "k").status_code == 201
    other = _post(client, "/api/v1/teams/", {"name": "risk"}, "k")
    assert other.status_code == 409
    assert other.json()["errors"][0]["field"] == "Idempotency-Key"
    assert "different request" in other.json()["errors"][0]["message"]
    assert not Team.objects.filter(name="risk").exists()
    bob = _client(make_user("bob", role="algorithm"))
    assert _post(bob, "/api/v1/teams/", {"name": "risk"}, "k").status_code == 201


def test_a_refusal_is_replayed_too_and_a_bad_key_is_a_400(ada):
    client = _client(ada)
    missing_team = {"name": "risk_score", "team": "nobody"}
    first = _post(client, "/api/v1/models/", missing_team, "k")
    assert first.status_code == 400
    Team.objects.create(name="nobody")  # the retry gets the stored answer, not a new try
    assert _post(client, "/api/v1/models/", missing_team, "k").json() == first.json()
    assert not Model.objects.exists()
    bad = _post(client, "/api/v1/teams/", {"name": "x"}, "k" * 256)
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "Idempotency-Key"


def test_recreating_a_team_model_or_cluster_is_a_409_naming_it(ada, make_user):
    client = _client(ada)
    assert client.post("/api/v1/teams/", {"name": "fraud"}, format="json").status_code == 201
    body = {"name": "risk_score", "team": "fraud"}
    assert client.post("/api/v1/models/", body, format="json").status_code == 201
    again = client.post("/api/v1/models/", body, format="json")
    assert again.status_code == 409
    assert again.json()["errors"] == [
        {"field": "name", "message": "A model named 'risk_score' already exists."}
    ]
    rita = _client(make_user("rita", role="release-managers"))
    cluster = {"name": "prod", "environment": "production"}
    assert rita.post("/api/v1/clusters/", cluster, format="json").status_code == 201
    dup = rita.post("/api/v1/clusters/", cluster, format="json")
    assert dup.status_code == 409 and "'prod' already exists" in dup.json()["errors"][0]["message"]
    assert TritonCluster.objects.count() == 1


def _upload(client, archive: bytes, key: str | None = None, query: str = "", label: str = ""):
    upload = io.BytesIO(archive)
    upload.name = "m.tar.gz"
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(
        f"/api/v1/models/risk_score/versions/{query}",
        {"archive": upload, "label": label},
        format="multipart",
        **headers,
    )


def test_uploads_retry_safely_and_equal_files_answer_the_existing_version(ada, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    team_create(name="fraud", actor=ada)
    model_create(name="risk_score", team="fraud", actor=ada)
    client = _client(ada)
    archive = tar_gz(example_entries("risk_score", 1))
    first = _upload(client, archive, key="u-1", label="a")
    assert first.status_code == 201
    assert _upload(client, archive, key="u-1", label="a").json() == first.json()
    other = tar_gz(example_entries("risk_score", 2))
    assert _upload(client, other, key="u-1", label="a").status_code == 409  # other files
    dup = _upload(client, archive, label="b")
    assert dup.status_code == 409
    assert "already version 1 ('a')" in dup.json()["errors"][0]["message"]
    existing = _upload(client, archive, query="?return_existing=true", label="b")
    assert existing.status_code == 200 and existing.json()["version"] == 1
    assert ModelVersion.objects.count() == 1


def test_a_retried_release_creation_starts_one_release(ada, make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    rita = make_user("rita", role="release-managers")
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
    body = {
        "cluster": "prod",
        "model": "risk_score",
        "candidate_version": 2,
        "steps": [10, 100],
        "step_interval_s": 5,
        "require_benchmark": False,
    }
    client = _client(rita)
    first = _post(client, "/api/v1/releases/", body, "r-1")
    assert first.status_code == 201, first.content
    again = _post(client, "/api/v1/releases/", body, "r-1")
    assert again.status_code == 201 and again.json() == first.json()
    assert Release.objects.count() == 1
    assert _post(client, "/api/v1/releases/", body, "r-2").status_code == 409


def test_old_keys_are_pruned_by_the_periodic_task(ada, settings):
    settings.SWITCHYARD_IDEMPOTENCY_KEY_HOURS = 24
    client = _client(ada)
    assert _post(client, "/api/v1/teams/", {"name": "fraud"}, "old").status_code == 201
    assert _post(client, "/api/v1/teams/", {"name": "risk"}, "new").status_code == 201
    old = IdempotencyKey.objects.get(key="old")
    IdempotencyKey.objects.filter(pk=old.pk).update(created_at=old.created_at - timedelta(hours=25))
    assert idempotency_keys_prune() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]
    assert settings.CELERY_BEAT_SCHEDULE["accounts-idempotency-keys-prune"]["task"] == (
        "accounts.idempotency_keys_prune"
    )


def test_a_retry_while_the_first_request_still_runs_is_a_409(ada):
    client = _client(ada)
    assert _post(client, "/api/v1/teams/", {"name": "fraud"}, "k").status_code == 201
    row = IdempotencyKey.objects.get(key="k")
    IdempotencyKey.objects.filter(pk=row.pk).update(status=None, body=None)
    # As if running: another database session holds the key's lock, as its request would.
    with psycopg.connect(database_url(), autocommit=True) as running:
        running.execute("SELECT pg_advisory_lock(%s, %s)", [idempotency.LOCK_NAMESPACE, row.pk])
        response = _post(client, "/api/v1/teams/", {"name": "fraud"}, "k")
    assert response.status_code == 409
    assert "still running" in response.json()["errors"][0]["message"]
    assert Team.objects.count() == 1


def test_a_key_whose_request_ended_without_an_answer_is_run_again_by_its_retry(ada):
    """A claim nobody holds (its request's database session ended: PostgreSQL restarted, the
    process was killed) no longer answers "still running" until it is pruned."""
    client = _client(ada)
    assert _post(client, "/api/v1/teams/", {"name": "fraud"}, "k").status_code == 201
    IdempotencyKey.objects.filter(key="k").update(status=None, body=None)
    Team.objects.all().delete()  # its work rolled back with the session
    again = _post(client, "/api/v1/teams/", {"name": "fraud"}, "k")
    assert again.status_code == 201, again.content
    assert "Idempotent-Replayed" not in again.headers
    assert Team.objects.filter(name="fraud").count() == 1
    assert IdempotencyKey.objects.get(key="k").status == 201
