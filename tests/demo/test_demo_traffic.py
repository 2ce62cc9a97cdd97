"""demo_traffic: steady requests at every serving model of a cluster, loopback only."""

import io
import re
import subprocess
import sys
import uuid

import pytest
from django.core.management import call_command
from django.db import transaction

from demo.traffic import Traffic, TrafficTarget, check_loopback
from deployments.services import serving_state_set
from models_registry.services import model_create, model_version_register, team_create
from tests.conftest import wait_for
from tests.nodes import keyed_client
from tests.registry.archives import example_entries, tar_gz
from tests.telemetry.live import db_cluster, load_example, unload


def test_traffic_refuses_targets_beyond_the_loopback():
    assert check_loopback("http://localhost:8000") == "127.0.0.1:8000"
    with pytest.raises(ValueError, match="127.0.0.1"):
        Traffic([TrafficTarget("http://10.0.0.5:8000", "m", "", b"{}")], rps=1)


@pytest.mark.triton
@pytest.mark.django_db
def test_demo_traffic_sends_steady_requests_to_each_serving_version(
    triton_cluster, make_user, settings, tmp_path
):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    name = f"demo_{uuid.uuid4().hex[:8]}"
    team_create(name="fraud", actor=ada)
    model = model_create(name=name, team="fraud", actor=ada)
    entries = example_entries("risk_score", 2)
    config = entries[0][1].replace(b'name: "risk_score"', f'name: "{name}"'.encode())
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *entries[1:]]))
    version = model_version_register(model=model, archive=archive, actor=ada)
    cluster = db_cluster(name.replace("_", "-"), triton_cluster.nodes)
    with transaction.atomic():
        serving_state_set(cluster=cluster, model=model, versions=[version])
    load_example(triton_cluster.nodes, example="risk_score", name=name, versions=[1])
    out = io.StringIO()
    try:
        call_command("demo_traffic", cluster=cluster.name, rps=20, duration=2, stdout=out)
        sent = int(re.search(r"sent (\d+)", out.getvalue()).group(1))
        assert 30 <= sent <= 45 and "'200'" in out.getvalue()
        # Every request reached a node, spread over both. Triton counts a request when its
        # backend releases it, just after the answer: the last one may be counted late.
        wait_for(lambda: _served(triton_cluster.nodes, name) == sent, timeout_s=5,
                 what=f"Triton's count of the {sent} requests sent")  # fmt: skip
    finally:
        unload(triton_cluster.nodes, name)


def _served(nodes, model: str) -> int:
    served = 0
    for node in nodes:
        with keyed_client(node) as client:
            served += sum(s["inference_count"] for s in client.statistics(model))
    return served


def _sent_so_far(log) -> int:
    counts = re.findall(r"^sent (\d+) so far", log.read_text(), re.M)
    return int(counts[-1]) if counts else 0


@pytest.mark.triton
def test_demo_traffic_carries_on_when_its_model_is_unloaded_through_the_api(
    triton_cluster, celery_worker, make_user, tmp_path
):
    """#18: the demo stopped because its traffic generator raised once a model it sent to
    was unloaded through the API. Now it logs, follows what still serves, and keeps going."""
    from rest_framework.test import APIClient

    from controlplane.celery import app
    from tests.conftest import ROOT, child_environment, stop_process, wait_for

    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    suffix = uuid.uuid4().hex[:6]
    stay, gone = f"stay_{suffix}", f"gone_{suffix}"
    cluster = db_cluster(f"traffic-{suffix}", triton_cluster.nodes)
    for name in (stay, gone):
        model = model_create(name=name, team="fraud", actor=ada)
        entries = example_entries("risk_score", 1)
        config = entries[0][1].replace(b'name: "risk_score"', f'name: "{name}"'.encode())
        archive = io.BytesIO(tar_gz([("config.pbtxt", config), *entries[1:]]))
        version = model_version_register(model=model, archive=archive, actor=ada)
        with transaction.atomic():
            serving_state_set(cluster=cluster, model=model, versions=[version])
        load_example(triton_cluster.nodes, example="risk_score", name=name, versions=[1])
    log = tmp_path / "traffic.log"
    args = ["manage.py", "demo_traffic", "--cluster", cluster.name, "--rps", "20", "--refresh", "1"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env=child_environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: _sent_so_far(log) > 20, timeout_s=60, what="traffic", proc=proc, log=log)
        api = APIClient()
        api.force_authenticate(rita)
        default_queue, app.conf.task_default_queue = (
            app.conf.task_default_queue,
            celery_worker.queue,
        )
        try:
            answer = api.post(f"/api/v1/clusters/{cluster.name}/models/{gone}/unload/")
        finally:
            app.conf.task_default_queue = default_queue
        assert answer.status_code == 202, answer.content
        url = f"/api/v1/deployments/{answer.json()['id']}/"
        finished = lambda: api.get(url).json()["status"] in ("succeeded", "failed")  # noqa: E731
        wait_for(finished, timeout_s=60, what="the unload")
        assert api.get(url).json()["status"] == "succeeded"
        now_at = f"demo traffic now at: {stay} v1\n"
        wait_for(lambda: now_at in log.read_text(), timeout_s=30, what="retarget", proc=proc)
        before, served_before = _sent_so_far(log), _served(triton_cluster.nodes, stay)
        wait_for(
            lambda: _sent_so_far(log) >= before + 40, timeout_s=30, what="more", proc=proc, log=log
        )
        assert proc.poll() is None  # still running
        assert _served(triton_cluster.nodes, stay) > served_before  # and still serving
    finally:
        stop_process(proc)
        unload(triton_cluster.nodes, stay)
        unload(triton_cluster.nodes, gone)
    assert "Traceback" not in log.read_text()
