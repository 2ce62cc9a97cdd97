"""One error vocabulary (issue #17): 404 for a missing object named in a body, unknown fields
refused by name, choice errors that list the choices, one active release per model (409)."""

import io

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.models import ServingState
from deployments.services import cluster_create, serving_state_set
from models_registry.models import Model
from models_registry.services import model_create, model_version_register, team_create
from releases.models import Release
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings, tmp_path, make_user):
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
    router = {"driver": "nginx", "listen": "127.0.0.1:1"}
    prod = cluster_create(actor=rita, name="prod", environment="production", router=router)
    cluster_create(actor=rita, name="stage", environment="staging")
    serving_state_set(cluster=prod, model=model, versions=[versions[0]])
    clients = {}
    for name, user in (("ada", ada), ("rita", rita)):
        clients[name] = APIClient()
        clients[name].force_authenticate(user)
    return {**clients, "prod": prod, "model": model, "versions": versions}


RELEASE = {
    "cluster": "prod",
    "model": "risk_score",
    "candidate_version": 2,
    "steps": [10, 100],
    "step_interval_s": 5,
    "require_benchmark": False,
}


def _only_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    (error,) = response.json()["errors"]
    return error


def test_a_missing_version_or_cluster_named_in_a_body_is_a_404_everywhere(world):
    ada, rita = world["ada"], world["rita"]
    missing = "Model 'risk_score' has no version 9."
    deploy = {"cluster": "prod", "model": "risk_score", "version": 9}
    assert _only_error(rita.post("/api/v1/deployments/", deploy, format="json"), 404) == {
        "field": "version",
        "message": missing,
    }
    release = {**RELEASE, "candidate_version": 9}
    error = _only_error(rita.post("/api/v1/releases/", release, format="json"), 404)
    assert error == {"field": "candidate_version", "message": missing}
    alias = ada.put("/api/v1/models/risk_score/aliases/latest/", {"version": 9}, format="json")
    assert _only_error(alias, 404) == {"field": "version", "message": missing}
    bench = {"model": "risk_score", "version": 9, "cluster": "stage"}
    assert _only_error(ada.post("/api/v1/benchmarks/", bench, format="json"), 404)["field"] == (
        "version"
    )
    nowhere = {**deploy, "version": 1, "cluster": "nowhere"}
    error = _only_error(rita.post("/api/v1/deployments/", nowhere, format="json"), 404)
    assert error == {"field": "cluster", "message": "No cluster named 'nowhere'."}
    error = _only_error(
        rita.post("/api/v1/releases/", {**RELEASE, "cluster": "nowhere"}, format="json"), 404
    )
    assert error == {"field": "cluster", "message": "No cluster named 'nowhere'."}
    error = _only_error(
        ada.post("/api/v1/benchmarks/", {**bench, "version": 1, "cluster": "x"}, format="json"),
        404,
    )
    assert error["field"] == "cluster"


def test_unknown_body_fields_are_refused_by_name(world):
    ada, rita = world["ada"], world["rita"]
    body = {"name": "other", "team": "fraud", "colour": "red", "sla": {"p99": 5}}
    response = ada.post("/api/v1/models/", body, format="json")
    assert response.status_code == 400
    fields = [e["field"] for e in response.json()["errors"]]
    assert fields == ["colour"]  # the body's unknown fields first; nested ones once it passes
    assert (
        "known fields are: description, name, sla, tags, team"
        in (response.json()["errors"][0]["message"])
    )
    nested = ada.post(
        "/api/v1/models/", {"name": "other", "team": "fraud", "sla": {"p99": 5}}, format="json"
    )
    assert [e["field"] for e in nested.json()["errors"]] == ["sla.p99"]
    assert not Model.objects.filter(name="other").exists()
    typo = {**RELEASE, "stpes": [50, 100]}
    error = _only_error(rita.post("/api/v1/releases/", typo, format="json"), 400)
    assert error["field"] == "stpes" and not Release.objects.exists()
    upload = io.BytesIO(tar_gz(example_entries("risk_score", 3)))
    upload.name = "m.tar.gz"
    multipart = ada.post(
        "/api/v1/models/risk_score/versions/",
        {"archive": upload, "lable": "x"},
        format="multipart",
    )
    assert _only_error(multipart, 400)["field"] == "lable"
    cluster = {"name": "c2", "environment": "staging", "gpu": "L4"}
    assert _only_error(rita.post("/api/v1/clusters/", cluster, format="json"), 400)["field"] == (
        "gpu"
    )


def test_choice_errors_list_the_valid_choices(world):
    rita = world["rita"]
    error = _only_error(
        rita.post("/api/v1/releases/", {**RELEASE, "strategy": "yolo"}, format="json"), 400
    )
    assert error == {
        "field": "strategy",
        "message": '"yolo" is not a valid choice; valid choices: "canary", "blue_green".',
    }
    cluster = {"name": "c2", "environment": "prod"}
    error = _only_error(rita.post("/api/v1/clusters/", cluster, format="json"), 400)
    assert 'valid choices: "staging", "production"' in error["message"]


def test_a_second_release_is_a_409_naming_the_active_one_whatever_its_phase(world):
    rita = world["rita"]
    first = rita.post("/api/v1/releases/", RELEASE, format="json")
    assert first.status_code == 201, first.content
    release_id = first.json()["id"]
    # While it loads, both versions serve: that used to answer a misleading 400.
    Release.objects.filter(pk=release_id).update(phase="LOADING")
    serving_state_set(cluster=world["prod"], model=world["model"], versions=world["versions"])
    error = _only_error(rita.post("/api/v1/releases/", RELEASE, format="json"), 409)
    assert error["message"] == (
        f"risk_score already has an active release on prod: release {release_id}, loading."
    )


def test_a_dry_run_release_runs_every_check_and_starts_nothing(world):
    rita = world["rita"]
    plan = rita.post("/api/v1/releases/", {**RELEASE, "dry_run": True}, format="json")
    assert plan.status_code == 200, plan.content
    body = plan.json()
    assert body["dry_run"] is True
    assert (body["cluster"], body["model"]) == ("prod", "risk_score")
    assert (body["baseline_version"], body["candidate_version"]) == (1, 2)
    assert body["strategy"] == "canary" and len(body["steps"]) == 2
    assert not Release.objects.exists()
    assert not AuditEvent.objects.filter(action="release.created").exists()
    assert ServingState.objects.get(cluster=world["prod"]).owner == ""
    refused = rita.post(
        "/api/v1/releases/",
        {**RELEASE, "dry_run": True, "require_benchmark": True},
        format="json",
    )
    assert _only_error(refused, 400)["field"] == "candidate_version"  # no passing benchmark
    assert rita.post("/api/v1/releases/", RELEASE, format="json").status_code == 201
    again = rita.post("/api/v1/releases/", {**RELEASE, "dry_run": True}, format="json")
    assert "already has an active release" in _only_error(again, 409)["message"]
    assert Release.objects.count() == 1
