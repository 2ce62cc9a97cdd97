"""Fault tests: real processes, each fault injected by a signal or a restart, on Triton nodes of
their own (never the session's shared nodes) and Celery queues of their own."""

import io
import uuid

import pytest

from deployments.services import cluster_create, node_create
from integrations.triton.local import start_cluster
from models_registry.services import model_create, model_version_register, team_create
from tests.conftest import drop_queues, session_node_key
from tests.registry.archives import example_entries, tar_gz

# A python model whose load takes this long (its initialize() sleeps): long enough to kill a
# worker while a push or a benchmark waits on it.
SLOW_LOAD_S = 12


@pytest.fixture(scope="module")
def fault_node(tmp_path_factory):
    """One real Triton node of this module's own: faults leave it loading or loaded."""
    cluster = start_cluster(1, tmp_path_factory.mktemp("faults"), node_key=session_node_key())
    try:
        yield cluster.nodes[0]
    finally:
        cluster.stop()


def slow_entries(
    model: str, seconds: float = SLOW_LOAD_S, variant: int = 1
) -> list[tuple[str, bytes]]:
    """risk_score `variant` named `model`, whose initialize() first sleeps `seconds`."""
    entries = example_entries("risk_score", variant)
    config = entries[0][1].replace(b'name: "risk_score"', f'name: "{model}"'.encode())
    out = [("config.pbtxt", config)]
    for name, data in entries[1:]:
        if name.endswith("model.py"):
            data = data.replace(
                b"    def initialize(self, args):\n",
                b"    def initialize(self, args):\n"
                + f"        import time\n\n        time.sleep({seconds})\n".encode(),
            )
            assert b"time.sleep" in data
        out.append((name, data))
    return out


def register(model, user, entries):
    return model_version_register(model=model, actor=user, archive=io.BytesIO(tar_gz(entries)))


@pytest.fixture
def fault_world(transactional_db, fault_node, settings, tmp_path, make_user):
    """Users, a team, a staging cluster on the fault node; leases of 3 s."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_WORK_LEASE_S = 3.0
    settings.SWITCHYARD_DEPLOY_DRAIN_S = 0.2
    ada = make_user("ada", role="algorithm")
    rita = make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    cluster = cluster_create(
        actor=rita, name="faults", environment="staging", router={"driver": "none"}
    )
    node_create(
        cluster=cluster,
        actor=rita,
        name=fault_node.name,
        http_url=fault_node.http_url,
        grpc_url=fault_node.grpc_url,
        metrics_url=fault_node.metrics_url,
    )
    return {"ada": ada, "rita": rita, "cluster": cluster, "node": fault_node, "tmp": tmp_path}


@pytest.fixture
def fault_queue():
    """A base queue of this test's own, made the app's default while the test runs; its lanes'
    queues and any message a killed worker held are dropped from Redis afterwards."""
    from controlplane.celery import app

    queue = f"faults-{uuid.uuid4().hex[:10]}"
    before, app.conf.task_default_queue = app.conf.task_default_queue, queue
    try:
        yield queue
    finally:
        app.conf.task_default_queue = before
        drop_queues(queue)


def new_model(world, name: str):
    return model_create(name=name, team="fraud", actor=world["ada"])
