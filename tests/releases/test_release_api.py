"""Release API refusals that need no traffic: roles, input, and the benchmark requirement."""

import pytest
from rest_framework.test import APIClient

from deployments.models import ServingState, ServingVersion
from releases.models import Release
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    world = release_world(make_user, require_benchmark=True)
    api = APIClient()
    api.force_authenticate(world["rita"])
    return {"api": api, **world}


BODY = {
    "cluster": "prod",
    "model": "risk_score",
    "candidate_version": 2,
    "steps": [10, 100],
    "step_interval_s": 5,
}


def test_cluster_requiring_a_benchmark_refuses_a_candidate_without_one(setup):
    response = setup["api"].post("/api/v1/releases/", BODY, format="json")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "candidate_version"
    assert "v2 has no passing benchmark" in error["message"]
    assert not Release.objects.exists()


def test_a_release_can_waive_the_cluster_requirement_and_then_starts_pending(setup):
    response = setup["api"].post(
        "/api/v1/releases/", {**BODY, "require_benchmark": False}, format="json"
    )
    assert response.status_code == 201, response.content
    body = setup["api"].get(f"/api/v1/releases/{response.json()['id']}/").json()
    assert body["state"] == "pending" and body["baseline_version"] == 1
    assert [s["weight"] for s in body["steps"]] == [10.0, 100.0]
    again = setup["api"].post(
        "/api/v1/releases/", {**BODY, "require_benchmark": False}, format="json"
    )
    assert again.status_code == 409  # one active release per model and cluster
    deploy = setup["api"].post(
        "/api/v1/deployments/",
        {"cluster": "prod", "model": "risk_score", "version": 2},
        format="json",
    )
    assert deploy.status_code == 409  # the release owns the model's serving state
    assert "under release" in deploy.json()["errors"][0]["message"]


def test_only_release_managers_start_releases_and_bad_input_is_named(setup):
    api = APIClient()
    api.force_authenticate(setup["ada"])
    assert api.post("/api/v1/releases/", BODY, format="json").status_code == 403
    bad = setup["api"].post(
        "/api/v1/releases/", {**BODY, "require_benchmark": False, "steps": [50, 20]}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "steps"
    same = setup["api"].post(
        "/api/v1/releases/",
        {**BODY, "candidate_version": 1, "require_benchmark": False},
        format="json",
    )
    assert same.status_code == 400 and "already serves" in same.json()["errors"][0]["message"]
    ServingVersion.objects.all().delete()
    ServingState.objects.all().delete()
    none = setup["api"].post(
        "/api/v1/releases/", {**BODY, "require_benchmark": False}, format="json"
    )
    assert none.status_code == 400 and "deploy one first" in none.json()["errors"][0]["message"]


def test_cockpit_follows_the_websocket_and_shows_the_next_check_and_four_charts(setup, client):
    import json
    import re
    import time

    from releases.models import ReleaseEvent

    created = setup["api"].post(
        "/api/v1/releases/", {**BODY, "require_benchmark": False}, format="json"
    )
    release = Release.objects.get(pk=created.json()["id"])
    started = time.time() - 2
    Release.objects.filter(pk=release.pk).update(
        phase="PROGRESSING", candidate_weight=10, interval={"start": {"at": started}}
    )
    ReleaseEvent.objects.create(
        release=release,
        kind="analysis",
        phase="PROGRESSING",
        message="pass",
        data={
            "at": started,
            "seconds": 5.0,
            "weight": 10,
            "result": "pass",
            "checks": [
                {
                    "name": "p99_vs_baseline",
                    "passed": True,
                    "text": "p99 5 ≤ 1.3×4",
                    "threshold": 5.2,
                }
            ],
            "baseline": {"requests": 900, "p99_ms": 4, "queue_ms": 0.1},
            "candidate": {"requests": 100, "p99_ms": 5, "queue_ms": 0.2},
        },
    )
    client.force_login(setup["ada"])
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert f'data-ws="/ws/releases/{release.pk}/"' in page and "hx-trigger" not in page
    assert 'data-testid="ws-badge"' in page
    next_check = float(re.search(r'data-next-check="([0-9.]+)"', page).group(1))
    assert next_check == pytest.approx(started + 5)  # interval start + step_interval_s
    for chart in ("chart-success", "chart-p99", "chart-rps", "chart-queue"):
        assert f'id="{chart}"' in page
    script = r'<script id="cockpit-chart" type="application/json">(.+?)</script>'
    chart = json.loads(re.search(script, page).group(1))  # once, for the four charts
    assert chart["seconds"] == [5.0] and chart["candidate"]["requests"] == [100]  # columns
    assert chart["results"] == ["pass"] and chart["limits"]["p99_ms"] == [5.2]
    assert "success_rate" not in chart["limits"]  # a gate never judged draws no line
    assert "first_token_p95_ms" not in chart["candidate"]  # nor a measure no interval has
    assert (chart["intervals"], chart["shown"]) == (1, 1)
    Release.objects.filter(pk=release.pk).update(phase="SUCCEEDED")
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert "data-ws=" not in page and "data-next-check" not in page and "finished" in page


def _import_passing_results(setup) -> None:
    from pathlib import Path

    from django.core.files.uploadedfile import SimpleUploadedFile

    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "benchmarks"
    csv = fixtures / "perf_analyzer_risk_score.csv"
    api = APIClient()
    api.force_authenticate(setup["ada"])
    answer = api.post(
        "/api/v1/models/risk_score/versions/2/benchmarks/import/",
        {"file": SimpleUploadedFile("pa.csv", csv.read_bytes()), "format": "perf_analyzer"},
        format="multipart",
    )
    assert answer.status_code == 201 and answer.json()["verdict"]["passed"] is True


def test_imported_results_do_not_satisfy_the_evidence_gate_by_default(setup):
    _import_passing_results(setup)
    response = setup["api"].post("/api/v1/releases/", BODY, format="json")
    assert response.status_code == 400
    assert "imported results do not count" in response.json()["errors"][0]["message"]
    assert not Release.objects.exists()


def test_imported_results_satisfy_the_gate_when_the_setting_allows(setup, settings):
    settings.SWITCHYARD_ACCEPT_IMPORTED_BENCHMARKS = True
    _import_passing_results(setup)
    response = setup["api"].post("/api/v1/releases/", BODY, format="json")
    assert response.status_code == 201, response.content


def test_a_release_records_the_sla_it_starts_with(setup, client):
    from models_registry.services import model_update

    model_update(model=setup["versions"][0].model, actor=setup["ada"], sla={"p99_latency_ms": 40})
    response = setup["api"].post(
        "/api/v1/releases/", {**BODY, "require_benchmark": False}, format="json"
    )
    release = Release.objects.get(pk=response.json()["id"])
    assert release.sla["p99_latency_ms"] == 40 and release.sla["min_success_rate"] is None
    answered = setup["api"].get(f"/api/v1/releases/{release.pk}/").json()["sla"]
    assert answered["p99_latency_ms"] == 40 and answered["min_success_rate"] is None
    # The cockpit shows the recorded SLA, whatever the live model says now (in words; its
    # charts draw it once an interval was analysed).
    type(release.model).objects.filter(pk=release.model_id).update(sla_p99_latency_ms=7)
    client.force_login(setup["ada"])
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert "SLA: p99 ≤ 40 ms" in page and "p99 ≤ 7 ms" not in page
