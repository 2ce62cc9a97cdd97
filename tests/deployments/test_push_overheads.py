"""The work around a push's loads stays small: shared verified bytes, writes that overlap the
loads or go out in one statement, the smallest warm-up request. No Triton node needed."""

import os
import threading
import time
from types import SimpleNamespace

import pytest

from deployments import push
from deployments.models import DeploymentNode
from deployments.services import (
    cluster_create,
    deployment_create,
    deployment_nodes_record,
    node_create,
)
from integrations.concurrency import fan_out
from models_registry.services import model_create, team_create
from models_registry.storage import blob_path
from tests.registry.archives import register_risk_score_as


@pytest.fixture
def version(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_lean", team="fraud", actor=ada)
    return register_risk_score_as(model, ada, 1)


def _corrupt(entry: dict) -> None:
    path = blob_path(entry["sha256"])
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.django_db
def test_plans_of_one_push_share_the_bytes_verified_for_the_first(version):
    blobs: dict[str, bytes] = {}
    first = push.build_plan([version], upload=True, blobs=blobs)
    assert set(blobs) == {e["sha256"] for e in version.files()}
    _corrupt(next(e for e in version.files() if e["path"] == "weights.npz"))
    # The retire (or revert) plan of the same push is not read from storage again...
    again = push.build_plan([version], upload=True, blobs=blobs)
    assert again.files == first.files
    # ...while a new push re-hashes and refuses the changed file.
    with pytest.raises(push.CorruptArtifact, match="weights.npz"):
        push.build_plan([version], upload=True)


@pytest.mark.django_db
def test_outcomes_of_many_nodes_are_written_in_one_statement(
    version, make_user, django_assert_num_queries
):
    rita = make_user("rita", role="release-managers")
    cluster = cluster_create(actor=rita, name="lean", environment="staging")
    nodes = [
        node_create(cluster=cluster, actor=rita, name=f"n{i}", http_url=f"http://127.0.0.1:{i + 1}")
        for i in range(3)
    ]
    deployment = deployment_create(cluster=cluster, version=version, actor=rita)
    with django_assert_num_queries(1):
        deployment_nodes_record(
            deployment,
            {
                nodes[0].pk: {"status": "ready", "load_ms": 120.5, "warmup_ms": 21.0, "error": ""},
                nodes[1].pk: {"status": "failed", "load_ms": None, "error": "refused"},
            },
        )
    rows = {r.node_id: r for r in DeploymentNode.objects.filter(deployment=deployment)}
    ready, failed, untouched = (rows[n.pk] for n in nodes)
    assert (ready.status, ready.load_ms, ready.warmup_ms) == ("ready", 120.5, 21.0)
    assert (failed.status, failed.load_ms, failed.error) == ("failed", None, "refused")
    assert (untouched.status, untouched.load_ms) == ("pending", None)


def test_fan_out_hands_over_each_result_as_it_arrives_and_returns_all_by_node():
    nodes = [SimpleNamespace(pk=pk, delay=delay) for pk, delay in ((1, 0.6), (2, 0.0), (3, 0.3))]
    events: list = []
    lock = threading.Lock()

    def work(node):
        time.sleep(node.delay)
        return node.pk * 10

    def seen(what):
        with lock:
            events.append(what)

    results = fan_out(
        nodes,
        work,
        while_waiting=lambda: seen("waiting"),
        on_result=lambda node, result: seen((node.pk, result)),
    )
    assert results == {1: 10, 2: 20, 3: 30}
    assert events == ["waiting", (2, 20), (3, 30), (1, 10)]


def test_warm_up_request_is_the_smallest_the_config_allows():
    config = {
        "max_batch_size": 16,
        "input": [
            {"name": "TOKENS", "data_type": "TYPE_INT64", "dims": ["-1"]},
            {"name": "IMAGE", "data_type": "TYPE_FP32", "dims": [3, -1, -1]},
        ],
    }
    plan = push.LoadPlan(model="m", versions=[1], config_json="{}", config_dict=config)
    shapes = {name: array.shape for name, array in push.warmup_inputs(plan.config_dict).items()}
    assert shapes == {"TOKENS": (1, 1), "IMAGE": (1, 3, 1, 1)}


def test_bytecode_placeholders_go_where_python_would_write_and_the_version_ships_none():
    from deployments.push import _bytecode_folders

    paths = ["model.py", "weights.npz", "lib/util.py", "pkg/mod.py", "pkg/__pycache__/mod.pyc"]
    assert _bytecode_folders(paths) == {"", "lib"}
    assert _bytecode_folders(["model.onnx"]) == set()
