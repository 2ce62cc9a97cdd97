"""A release whose candidate's config differs from the baseline's in what Triton makes them
share is refused, through the API and the console alike, naming each differing field."""

import io

import pytest
from rest_framework.test import APIClient

from deployments.services import cluster_create, serving_state_set
from models_registry.services import model_version_register
from releases.models import Release
from tests.registry.archives import example_entries, tar_gz
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db

BODY = {
    "cluster": "prod",
    "model": "risk_score",
    "steps": [10, 100],
    "step_interval_s": 5,
    "require_benchmark": False,
}


@pytest.fixture
def world(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    world = release_world(make_user)
    entries = example_entries("risk_score", 3)
    config = (
        entries[0][1]
        .replace(b"max_batch_size: 64", b"max_batch_size: 16")
        .replace(b"count: 1", b"count: 2")
        .replace(b"# Fraud risk score", b"# a comment never counts\n# Fraud risk score")
    )
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *entries[1:]]))
    changed = model_version_register(model=world["model"], actor=world["ada"], archive=archive)
    api = APIClient()
    api.force_authenticate(world["rita"])
    return {**world, "api": api, "changed": changed}


def test_a_candidate_with_its_own_config_is_served_under_its_sibling_name(world):
    number = world["changed"].version
    dry = world["api"].post(
        "/api/v1/releases/",
        {**BODY, "candidate_version": number, "dry_run": True},
        format="json",
    )
    assert dry.status_code == 200, dry.content
    assert dry.json()["candidate_served_as"] == "risk_score--c3"
    assert not Release.objects.exists()
    started = world["api"].post(
        "/api/v1/releases/", {**BODY, "candidate_version": number}, format="json"
    )
    assert started.status_code == 201, started.content
    release = Release.objects.get()
    assert release.candidate_name == "risk_score--c3"
    detail = world["api"].get(f"/api/v1/releases/{release.pk}/").json()
    assert detail["candidate_served_as"] == "risk_score--c3"
    assert detail["config_changes"] == [
        {"path": "max_batch_size", "baseline": "64", "candidate": "16"},
        {"path": "instance_group[0].count", "baseline": "1", "candidate": "2"},
    ]


def test_a_candidate_sharing_the_baselines_config_serves_under_the_models_name(world):
    # v2 shares v1's config.pbtxt (examples/model_repository/risk_score).
    same = world["api"].post("/api/v1/releases/", {**BODY, "candidate_version": 2}, format="json")
    assert same.status_code == 201, same.content
    assert same.json()["candidate_served_as"] == "risk_score"
    assert Release.objects.get().candidate_name == ""
    detail = world["api"].get(f"/api/v1/releases/{same.json()['id']}/").json()
    assert detail["config_changes"] == []


def test_without_a_router_a_candidate_with_its_own_config_is_refused_naming_each_field(world):
    bare = cluster_create(actor=world["rita"], name="bare", environment="staging", router={})
    serving_state_set(cluster=bare, model=world["model"], versions=[world["versions"][0]])
    body = {**BODY, "cluster": "bare", "strategy": "blue_green", "dry_run": True}
    refused = world["api"].post(
        "/api/v1/releases/", {**body, "candidate_version": 3}, format="json"
    )
    assert refused.status_code == 400
    summary, *fields = refused.json()["errors"]
    assert summary["field"] == "candidate_version"
    assert "v3's config differs from v1's (serving now) in 2 fields" in summary["message"]
    assert "a config canary serves v3 under a name of its own" in summary["message"]
    assert "needs the cluster's router" in summary["message"]
    assert [e["message"] for e in fields] == [
        "max_batch_size: v1 (baseline) 64, v3 (candidate) 16.",
        "instance_group[0].count: v1 (baseline) 1, v3 (candidate) 2.",
    ]
    passed = world["api"].post("/api/v1/releases/", {**body, "candidate_version": 2}, format="json")
    assert passed.status_code == 200, passed.content


def test_the_console_form_shows_the_differences_as_a_table_where_there_is_no_router(world, client):
    bare = cluster_create(actor=world["rita"], name="bare", environment="staging", router={})
    serving_state_set(cluster=bare, model=world["model"], versions=[world["versions"][0]])
    client.force_login(world["rita"])
    page = client.post(
        "/releases/start/",
        {
            "cluster_id": bare.pk,
            "version_id": world["changed"].pk,
            "strategy": "blue_green",
            "steps": "100",
        },
    )
    assert page.status_code == 400
    text = page.content.decode()
    assert 'data-testid="config-diff"' in text and "Release refused:" in text
    assert "<th>v1 (baseline, serving)</th><th>v3 (candidate)</th>" in text
    assert (
        "<tr><td><code>max_batch_size</code></td><td><code>64</code></td>"
        "<td><code>16</code></td></tr>"
    ) in text
    assert "<code>instance_group[0].count</code>" in text
    assert 'data-testid="release-form"' in text  # the form is there to try again
    assert not Release.objects.exists()


def test_the_cockpit_of_a_config_canary_shows_the_sibling_and_the_differences(world, client):
    client.force_login(world["rita"])
    page = client.post(
        "/releases/start/",
        {
            "cluster_id": world["cluster"].pk,
            "version_id": world["changed"].pk,
            "strategy": "canary",
            "steps": "10,100",
        },
    )
    release = Release.objects.get()
    assert page.status_code == 302 and page["Location"].endswith(f"/releases/{release.pk}/")
    text = client.get(f"/releases/{release.pk}/").content.decode()
    assert 'data-testid="config-canary"' in text
    assert "serves beside v1 as <code>risk_score--c3</code> with its own config" in text
    assert (
        "<tr><td><code>max_batch_size</code></td><td><code>64</code></td>"
        "<td><code>16</code></td></tr>"
    ) in text


def test_a_shadow_is_checked_at_the_start_and_shown_on_the_cockpit(world, client):
    api = world["api"]
    body = {**BODY, "candidate_version": 2, "dry_run": True}
    for extra, field, words in (
        ({"shadow_s": 30, "shadow_share": 0}, "shadow_share", "more than 0 %"),
        ({"shadow_s": 700}, "shadow_s", "shorter than progress_deadline_s"),
        ({"shadow_s": -1}, "shadow_s", "greater than or equal to 0"),
    ):
        refused = api.post("/api/v1/releases/", {**body, **extra}, format="json")
        assert refused.status_code == 400, refused.content
        error = refused.json()["errors"][0]
        assert error["field"] == field and words in error["message"], error
    bare = cluster_create(actor=world["rita"], name="bare", environment="staging", router={})
    serving_state_set(cluster=bare, model=world["model"], versions=[world["versions"][0]])
    no_router = api.post(
        "/api/v1/releases/",
        {**body, "cluster": "bare", "strategy": "blue_green", "shadow_s": 30},
        format="json",
    )
    assert no_router.status_code == 400 and "a shadow needs one" in no_router.content.decode()
    client.force_login(world["rita"])
    page = client.post(
        "/releases/start/",
        {"cluster_id": world["cluster"].pk, "version_id": world["versions"][1].pk,
         "strategy": "canary", "steps": "10,100", "shadow_s": "45", "shadow_share": "20"},
    )  # fmt: skip
    release = Release.objects.get()
    assert page.status_code == 302 and (release.shadow_s, release.shadow_share) == (45.0, 20.0)
    detail = api.get(f"/api/v1/releases/{release.pk}/").json()
    assert (detail["shadow_s"], detail["shadow_share"], detail["router_mirror"]) == (45, 20, None)
    text = client.get(f"/releases/{release.pk}/").content.decode()
    assert 'data-testid="shadow-step"' in text and "shadow 45 s (20% copied)" in text
