"""DELETE /api/v1/models/{name}/: only models that never served in production; audited."""

import io

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.models import Deployment
from deployments.services import cluster_create, serving_state_set
from models_registry.models import Model, ModelVersion
from models_registry.services import model_create, model_version_register, team_create
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    version = model_version_register(
        model=model, actor=ada, archive=io.BytesIO(tar_gz(example_entries("risk_score", 1)))
    )
    api = APIClient()
    api.force_authenticate(ada)
    rita = make_user("rita", role="release-managers")
    return {"api": api, "ada": ada, "rita": rita, "model": model, "version": version}


def _cluster(world, name: str, environment: str):
    return cluster_create(actor=world["rita"], name=name, environment=environment)


def test_a_model_that_never_served_is_deleted_with_its_history_and_audited(world):
    staging = _cluster(world, "staging", "staging")
    Deployment.objects.create(
        cluster=staging, model=world["model"], version=world["version"], status="succeeded"
    )
    serving_state_set(cluster=staging, model=world["model"], versions=[])
    alias = {"version": 1}
    assert world["api"].put("/api/v1/models/risk_score/aliases/latest/", alias).status_code == 200
    response = world["api"].delete("/api/v1/models/risk_score/")
    assert response.status_code == 204, response.content
    assert not Model.objects.exists() and not ModelVersion.objects.exists()
    assert not Deployment.objects.exists()
    event = AuditEvent.objects.get(action="model.deleted")
    assert event.actor_username == "ada" and event.details["versions"] == [1]
    assert world["api"].delete("/api/v1/models/risk_score/").status_code == 404


def test_a_serving_model_is_refused_with_409(world):
    staging = _cluster(world, "staging", "staging")
    serving_state_set(cluster=staging, model=world["model"], versions=[world["version"]])
    response = world["api"].delete("/api/v1/models/risk_score/")
    assert response.status_code == 409
    assert response.json()["errors"][0]["message"] == (
        "Version 1 of 'risk_score' still serves; unload it first."
    )
    assert Model.objects.exists()
    assert not AuditEvent.objects.filter(action="model.deleted").exists()


def test_a_model_once_deployed_to_production_is_kept(world):
    prod = _cluster(world, "prod", "production")
    Deployment.objects.create(cluster=prod, model=world["model"], kind="unload", status="succeeded")
    response = world["api"].delete("/api/v1/models/risk_score/")
    assert response.status_code == 409
    assert "deployed to a production cluster" in response.json()["errors"][0]["message"]
    assert ModelVersion.objects.count() == 1


def test_only_members_of_the_models_team_delete_it(world, make_user):
    outsider = APIClient()
    outsider.force_authenticate(make_user("bob", role="algorithm"))
    assert outsider.delete("/api/v1/models/risk_score/").status_code == 403
    manager = APIClient()
    manager.force_authenticate(world["rita"])
    assert manager.delete("/api/v1/models/risk_score/").status_code == 403
    assert Model.objects.exists()
