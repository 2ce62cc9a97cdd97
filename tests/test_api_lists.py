"""Lists of async resources with ?model=&cluster=&state=&since= and paging (issue #17)."""

import io
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks.models import BenchmarkRun
from deployments.models import Deployment
from deployments.services import cluster_create, serving_state_set
from models_registry.services import model_create, model_version_register, team_create
from releases.models import Release
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    versions = {}
    for name in ("risk_score", "other_model"):
        model = model_create(name=name, team="fraud", actor=ada)
        entries = example_entries("risk_score", 1)
        entries[0] = (entries[0][0], entries[0][1].replace(b"risk_score", name.encode()))
        versions[name] = model_version_register(
            model=model, actor=ada, archive=io.BytesIO(tar_gz(entries))
        )
    clusters = {
        name: cluster_create(actor=rita, name=name, environment=env)
        for name, env in (("prod", "production"), ("stage", "staging"))
    }
    api = APIClient()
    api.force_authenticate(ada)
    return {"api": api, "versions": versions, "clusters": clusters}


def _ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()]


def test_deployments_are_listed_filtered_and_paged(world):
    v, c = world["versions"], world["clusters"]
    made = [
        Deployment.objects.create(cluster=c[cl], model=v[m].model, version=v[m], status=s)
        for cl, m, s in (
            ("prod", "risk_score", "succeeded"),
            ("stage", "risk_score", "failed"),
            ("prod", "other_model", "running"),
        )
    ]
    old = made[0]
    Deployment.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    api = world["api"]
    assert _ids(api.get("/api/v1/deployments/")) == [made[2].pk, made[1].pk, made[0].pk]
    assert _ids(api.get("/api/v1/deployments/?model=risk_score")) == [made[1].pk, made[0].pk]
    assert _ids(api.get("/api/v1/deployments/?cluster=prod&state=running")) == [made[2].pk]
    since = (timezone.now() - timedelta(days=1)).isoformat()
    assert _ids(api.get("/api/v1/deployments/", {"since": since})) == [made[2].pk, made[1].pk]
    page = api.get("/api/v1/deployments/?limit=1&offset=1")
    assert _ids(page) == [made[1].pk] and page["X-Total-Count"] == "3"
    bad = api.get("/api/v1/deployments/?state=done")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "state"
    assert '"succeeded"' in bad.json()["errors"][0]["message"]


def test_benchmarks_are_listed_filtered_and_paged(world):
    v, c = world["versions"], world["clusters"]
    runs = [
        BenchmarkRun.objects.create(version=v["risk_score"], cluster=c["stage"], status="pending"),
        BenchmarkRun.objects.create(version=v["other_model"], cluster=c["stage"], status="failed"),
        BenchmarkRun.objects.create(version=v["risk_score"], source="perf_analyzer"),
    ]
    api = world["api"]
    assert _ids(api.get("/api/v1/benchmarks/")) == [r.pk for r in reversed(runs)]
    assert _ids(api.get("/api/v1/benchmarks/?model=risk_score")) == [runs[2].pk, runs[0].pk]
    assert _ids(api.get("/api/v1/benchmarks/?cluster=stage&state=FAILED")) == [runs[1].pk]
    assert _ids(api.get("/api/v1/benchmarks/?model=nobody")) == []


def test_the_release_list_honours_its_filters(world):
    v, c = world["versions"], world["clusters"]
    releases = []
    for cluster, model, phase in (
        ("prod", "risk_score", "SUCCEEDED"),
        ("stage", "risk_score", "PROGRESSING"),
        ("prod", "other_model", "ROLLED_BACK"),
    ):
        version = v[model]
        serving_state_set(cluster=c[cluster], model=version.model, versions=[version])
        releases.append(
            Release.objects.create(
                cluster=c[cluster],
                model=version.model,
                baseline=version,
                candidate=version,
                steps=[],
                phase=phase,
            )
        )
    api = world["api"]
    assert _ids(api.get("/api/v1/releases/?model=risk_score")) == [
        releases[1].pk,
        releases[0].pk,
    ]
    assert _ids(api.get("/api/v1/releases/?state=rolled_back")) == [releases[2].pk]
    assert _ids(api.get("/api/v1/releases/?cluster=prod&state=SUCCEEDED")) == [releases[0].pk]
    bad = api.get("/api/v1/releases/?since=yesterday")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "since"
