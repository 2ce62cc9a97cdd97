"""A release says at its start what could keep it from being judged (issue #30): a model
without an SLA, and routed traffic too thin for the first step's min_requests, with the rate
it needs. The traffic is measured as a start measures it: from the router's access log (lines as the
rendered nginx config writes them)."""

import io
import re
import time

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from rest_framework.test import APIClient

from deployments.models import TritonCluster
from deployments.services import cluster_create, serving_state_set
from models_registry.models import ModelVersion
from models_registry.services import model_create, model_version_register, team_create
from releases.models import Release
from tests.registry.archives import example_entries, tar_gz
from tests.releases.test_unrouted_selector import write_log

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
    router = {"driver": "nginx", "listen": "127.0.0.1:1", "prefix_dir": str(tmp_path / "r")}
    cluster = cluster_create(actor=rita, name="measured", environment="production", router=router)
    serving_state_set(cluster=cluster, model=model, versions=[versions[0]])
    # Two requests a second through the router's split over the last three minutes.
    now = time.time()
    write_log(tmp_path, [(now - 180 + k * 0.5, "/v2/models/risk_score/infer") for k in range(360)])
    client = APIClient()
    client.force_authenticate(rita)
    return {"client": client, "ada": ada}


def _start(world, **body):
    payload = {"cluster": "measured", "model": "risk_score", "candidate_version": 2, **body}
    return world["client"].post("/api/v1/releases/", payload, format="json")


def test_thin_traffic_and_no_sla_are_warned_about_with_the_rate_needed(world):
    answer = _start(world, steps=[10, 100], step_interval_s=30, dry_run=True)
    assert answer.status_code == 200, answer.json()
    sla, traffic = answer.json()["warnings"]
    assert (
        sla.startswith("Model risk_score has no SLA") and "PATCH /api/v1/models/risk_score/" in sla
    )
    rate, window = re.search(
        r"([\d.]+) req/s went through .* over the last (\d+) s", traffic
    ).groups()
    assert 1.9 <= float(rate) <= 2.0 and window == "120", traffic
    (seen,) = re.findall(r"about ([\d.]+) candidate requests per 30 s interval", traffic)
    # Both numbers are rounded in the text (2 and 1 decimals).
    assert float(seen) == pytest.approx(float(rate) * 0.10 * 30, abs=0.07), traffic
    assert "under min_requests (50)" in traffic and "at least 16.67 req/s" in traffic
    created = _start(world, steps=[10, 100], step_interval_s=30)
    assert created.status_code == 201, created.json()
    stored = created.json()["warnings"]  # measured again: the rate may have moved a little
    assert stored[0] == sla and stored[1].startswith("Too little traffic to judge the first step")
    events = world["client"].get(f"/api/v1/releases/{created.json()['id']}/events/").json()
    assert [e["message"] for e in events if e["kind"] == "warning"] == stored


def test_enough_traffic_for_the_step_and_an_sla_start_without_warnings(world):
    world["client"].force_authenticate(world["ada"])
    patched = world["client"].patch(
        "/api/v1/models/risk_score/", {"sla": {"p99_latency_ms": 50}}, format="json"
    )
    assert patched.status_code == 200, patched.json()
    world["client"].force_authenticate(None)
    rita = APIClient()
    rita.force_authenticate(type(world["ada"]).objects.get(username="rita"))
    world["client"] = rita
    answer = _start(world, steps=[50, 100], step_interval_s=30, analysis={"min_requests": 10})
    assert answer.status_code == 201, answer.json()
    assert answer.json()["warnings"] == []


def test_a_cluster_that_requires_an_sla_refuses_a_model_without_one(world):
    rita = world["client"]
    assert rita.patch("/api/v1/clusters/measured/", {"require_sla": True}, format="json").json()[
        "require_sla"
    ]
    answer = _start(world, steps=[10, 100], dry_run=True)
    assert answer.status_code == 400, answer.json()
    (error,) = answer.json()["errors"]
    assert error["field"] == "candidate_version"
    assert error["message"].startswith("Cluster measured requires an SLA (require_sla).")
    assert "Model risk_score has no SLA" in error["message"]


def test_the_console_shows_the_warnings_on_the_model_page_at_start_and_on_the_cockpit(world):
    page = Client()
    page.force_login(type(world["ada"]).objects.get(username="rita"))
    model_page = page.get(reverse("console:model-detail", args=["risk_score"])).content.decode()
    assert 'data-testid="sla-warning"' in model_page
    assert "Model risk_score has no SLA" in model_page
    form = {
        "cluster_id": TritonCluster.objects.get(name="measured").pk,
        "version_id": ModelVersion.objects.get(model__name="risk_score", version=2).pk,
        "steps": "10,100",
        "step_interval_s": "30",
    }
    cockpit = page.post(reverse("console:release-start"), form, follow=True)
    assert cockpit.status_code == 200
    (release,) = Release.objects.all()
    assert len(release.warnings) == 2
    shown = cockpit.content.decode()
    assert 'data-testid="release-warnings"' in shown and "Started with 2 warnings" in shown
    for warning in release.warnings:  # the API's (releases/warnings.py), escaped as HTML
        assert escape(warning) in shown
    again = page.get(reverse("console:release-detail", args=[release.pk])).content.decode()
    assert "Started with 2 warnings" in again  # from the row, not only the flash
