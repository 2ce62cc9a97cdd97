"""demo_traffic: steady requests at every serving model of a cluster, loopback only."""

import io
import re
import uuid

import pytest
from django.core.management import call_command
from django.db import transaction

from demo.traffic import Traffic, TrafficTarget, check_loopback
from deployments.services import serving_state_set
from integrations.triton.client import TritonClient
from models_registry.services import model_create, model_version_register, team_create
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
        served = 0
        for node in triton_cluster.nodes:
            with TritonClient(node.http_url, node.grpc_url) as client:
                served += sum(s["inference_count"] for s in client.statistics(name))
        assert served == sent  # every request reached a node, spread over both
    finally:
        unload(triton_cluster.nodes, name)
