"""GET /metrics: values computed from real rows and Redis at scrape time, and who may read."""

import io
import uuid
from datetime import timedelta

import pytest
import redis
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from deployments.models import Deployment, DriftEvent, TritonNode
from deployments.services import cluster_create, node_create
from models_registry.services import model_create, model_version_register, team_create
from releases.models import Release, ReleaseEvent
from telemetry import status
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """(sample name, labels) -> value for every sample of an exposition."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict, name: str, **labels) -> float:
    return found[(name, frozenset(labels.items()))]


@pytest.fixture
def redis_clean(settings):
    """Fresh collector keys and a queue of our own in the tests' Redis database."""
    queue = f"test-metrics-{uuid.uuid4().hex[:8]}"
    settings.SWITCHYARD_METRICS_QUEUES = [queue]
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(status.status_key(), status.errors_key(), queue)
    yield client, queue
    client.delete(status.status_key(), status.errors_key(), queue)
    client.close()


@pytest.fixture
def fleet(settings, tmp_path, make_user):
    """A cluster with two nodes, a model with two versions, releases, pushes and drift."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    v1, v2 = (
        model_version_register(
            model=model, actor=ada, archive=io.BytesIO(tar_gz(example_entries("risk_score", v)))
        )
        for v in (1, 2)
    )
    cluster = cluster_create(actor=rita, name="prod", environment="production")
    for port, name in enumerate(("n1", "n2"), start=9):
        node_create(cluster=cluster, actor=rita, name=name, http_url=f"http://127.0.0.1:{port}")
    TritonNode.objects.filter(name="n1").update(health="up", last_seen_at=timezone.now())
    TritonNode.objects.filter(name="n2").update(health="down")
    common = {"cluster": cluster, "model": model, "baseline": v1, "candidate": v2}
    active = Release.objects.create(
        **common, steps=[{"weight": 25}], phase="PROGRESSING", candidate_weight=25.0
    )
    for result in ("pass", "pass", "fail"):
        ReleaseEvent.objects.create(
            release=active, kind="analysis", phase="PROGRESSING", message=result,
            data={"result": result},
        )  # fmt: skip
    Release.objects.create(**common, steps=[{"weight": 25}], phase="ROLLED_BACK")
    Release.objects.create(**common, steps=[{"weight": 25}], phase="SUCCEEDED")
    start = timezone.now()
    for took_s, state in ((0.5, "succeeded"), (3.0, "succeeded"), (40.0, "failed")):
        Deployment.objects.create(
            cluster=cluster, model=model, version=v2, status=state,
            started_at=start, finished_at=start + timedelta(seconds=took_s),
        )  # fmt: skip
    Deployment.objects.create(cluster=cluster, model=model, version=v2, status="pending")
    for kind in ("missing", "missing", "node_down"):
        DriftEvent.objects.create(cluster=cluster, node_name="n2", model_name="m", kind=kind)
    return {"active": active}


def test_metrics_report_releases_pushes_drift_nodes_collector_and_queues(
    client, fleet, redis_clean
):
    r, queue = redis_clean
    r.rpush(queue, "task-1", "task-2", "task-3")
    status.collector_status_record(at=1_700_000_000.0, took_s=0.25, failed=[("prod", "n2")] * 2)
    status.collector_status_record(at=1_700_000_002.0, took_s=0.5, failed=[("prod", "n2")])

    response = client.get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    found = samples(response.content.decode())
    rel = {"cluster": "prod", "model": "risk_score", "release": str(fleet["active"].pk)}
    assert value(found, "switchyard_release_phase", **rel, phase="PROGRESSING") == 1
    assert value(found, "switchyard_release_candidate_weight_ratio", **rel) == 0.25
    assert not [k for k in found if k[0] == "switchyard_release_phase" and len(k[1]) != 4]
    cm = {"cluster": "prod", "model": "risk_score"}
    assert value(found, "switchyard_release_rollbacks_total", **cm) == 1
    assert value(found, "switchyard_releases_finished_total", **cm, phase="SUCCEEDED") == 1
    assert value(found, "switchyard_release_analyses_total", **cm, result="pass") == 2
    assert value(found, "switchyard_release_analyses_total", **cm, result="fail") == 1
    deployments = {"cluster": "prod", "kind": "deploy"}
    assert value(found, "switchyard_deployments_total", **deployments, status="failed") == 1
    assert value(found, "switchyard_deployments_total", **deployments, status="pending") == 1
    hist = "switchyard_deployment_duration_seconds"
    assert value(found, hist + "_bucket", cluster="prod", le="1.0") == 1
    assert value(found, hist + "_bucket", cluster="prod", le="5.0") == 2
    assert value(found, hist + "_bucket", cluster="prod", le="+Inf") == 3
    assert value(found, hist + "_count", cluster="prod") == 3
    assert value(found, hist + "_sum", cluster="prod") == pytest.approx(43.5)
    drift = "switchyard_reconcile_drift_events_total"
    assert value(found, drift, cluster="prod", kind="missing") == 2
    assert value(found, "switchyard_node_up", cluster="prod", node="n1") == 1
    assert value(found, "switchyard_node_up", cluster="prod", node="n2") == 0
    seen = "switchyard_node_last_seen_timestamp_seconds"
    assert value(found, seen, cluster="prod", node="n1") > 0
    assert (seen, frozenset({"cluster": "prod", "node": "n2"}.items())) not in found  # never seen
    errors = "switchyard_collector_scrape_errors_total"
    assert value(found, errors, cluster="prod", node="n2") == 3
    assert value(found, "switchyard_collector_last_tick_timestamp_seconds") == 1_700_000_002.0
    assert value(found, "switchyard_collector_tick_duration_seconds") == 0.5
    assert value(found, "switchyard_collector_lag_seconds") > 0
    assert value(found, "switchyard_celery_queue_length", queue=queue) == 3
    assert value(found, "switchyard_redis_up") == 1


def test_metrics_without_redis_still_answer_from_the_database(client, fleet, settings):
    settings.REDIS_URL = settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    found = samples(client.get("/metrics").content.decode())
    assert value(found, "switchyard_redis_up") == 0
    assert value(found, "switchyard_node_up", cluster="prod", node="n1") == 1


def test_metrics_refuse_other_networks_unless_the_bearer_token_matches(client, settings):
    settings.SWITCHYARD_METRICS_TOKEN = "s3cret-metrics-token"
    outside = {"REMOTE_ADDR": "10.1.2.3"}
    refused = client.get("/metrics", **outside)
    assert refused.status_code == 401
    assert refused.json()["errors"][0]["message"] == "A valid metrics token is required."
    assert "s3cret" not in refused.content.decode()
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope", **outside)
    assert wrong.status_code == 401
    ok = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token", **outside)
    assert ok.status_code == 200
    assert client.get("/metrics").status_code == 200  # loopback is allowed by default
    settings.SWITCHYARD_METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert client.get("/metrics", **outside).status_code == 200
    assert client.get("/metrics").status_code == 401


def test_behind_a_declared_proxy_the_forwarded_client_address_is_judged(client, settings):
    """The proxy connects from inside the allowed network: a client it forwards from outside
    is refused, one from inside answered."""
    settings.SWITCHYARD_METRICS_TOKEN = ""
    settings.SWITCHYARD_METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    settings.SWITCHYARD_CLIENT_IP_HEADER = "HTTP_X_REAL_IP"
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    assert client.get("/metrics", HTTP_X_REAL_IP="203.0.113.9", **proxy).status_code == 401
    assert client.get("/metrics", HTTP_X_REAL_IP="10.1.2.3", **proxy).status_code == 200
    settings.SWITCHYARD_CLIENT_IP_HEADER = ""
    settings.SWITCHYARD_PROXY_COUNT = 1
    forwarded = {**proxy, "HTTP_X_FORWARDED_FOR": "10.9.9.9, 198.51.100.7"}
    assert client.get("/metrics", **forwarded).status_code == 401  # the last hop's client


def test_metrics_with_no_token_set_refuse_an_empty_bearer(client, settings):
    settings.SWITCHYARD_METRICS_TOKEN = ""
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer ", REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 401


def test_metrics_token_can_come_from_a_secret_file(tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT, child_environment

    (tmp_path / "token").write_text("from-a-file\n")
    env = child_environment(SWITCHYARD_METRICS_TOKEN_FILE=str(tmp_path / "token"))
    env.pop("SWITCHYARD_METRICS_TOKEN", None)
    code = "import django; django.setup(); from django.conf import settings as s; "
    code += "print(s.SWITCHYARD_METRICS_TOKEN)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "from-a-file", out.stderr
