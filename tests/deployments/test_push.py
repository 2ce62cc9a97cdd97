"""Fleet push, unload, reconcile and smoke validation against 3 real Triton nodes."""

import io
import os
import time
from pathlib import Path

import numpy as np
import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments import own_traffic
from deployments.executor import deployment_run
from deployments.models import Deployment, DriftEvent, ServingState
from deployments.reconcile import cluster_reconcile
from deployments.services import cluster_create, deployment_create, node_create
from deployments.smoke import model_version_smoke_validate
from integrations.triton.local import start_cluster
from models_registry.models import ModelVersion
from models_registry.services import model_create, model_version_register, team_create
from models_registry.storage import blob_path
from tests.conftest import session_node_key, wait_for
from tests.deploying import pushed
from tests.nodes import keyed_client
from tests.registry.archives import example_entries, register_risk_score_as, tar_gz

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Three real nodes of our own (faults are injected here, never on the shared nodes);
    they also share one model repository for the filesystem push mode."""
    work = tmp_path_factory.mktemp("fleet")
    shared = work / "shared-repo"
    shared.mkdir()
    cluster = start_cluster(
        3, work, extra_args=[f"--model-repository={shared}"], node_key=session_node_key()
    )
    cluster.shared_repository = shared
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def world(fleet, settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_DEPLOY_DRAIN_S = 0.2
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    return {"rita": rita, "ada": ada, "fleet": fleet}


def _register(model, user, variant: int, example="risk_score"):
    archive = io.BytesIO(tar_gz(example_entries(example, variant)))
    return model_version_register(model=model, archive=archive, actor=user)


def _cluster(world, name="prod", mode="upload", environment="production"):
    extra = {"repository_path": str(world["fleet"].shared_repository)} if mode != "upload" else {}
    cluster = cluster_create(
        actor=world["rita"],
        name=name,
        environment=environment,
        push_mode=mode,
        router={"driver": "none"},
        api_key=world["fleet"].node_key.value,  # the cluster's own key, sent on every push
        **extra,
    )
    for node in world["fleet"].nodes:
        node_create(
            cluster=cluster,
            actor=world["rita"],
            name=node.name,
            http_url=node.http_url,
            grpc_url=node.grpc_url,
            metrics_url=node.metrics_url,
        )
    return cluster


def _deploy(cluster, version, actor) -> Deployment:
    deployment = deployment_create(cluster=cluster, version=version, actor=actor)
    return deployment_run(deployment_id=deployment.pk)


def _loaded(node, model: str) -> set[str]:
    with keyed_client(node) as client:
        return client.loaded_models().get(model, set())


def _answering_version(node, model: str) -> str:
    with keyed_client(node) as client:
        features = np.random.default_rng(1).normal(size=(1, 128)).astype(np.float32)
        return client.infer(model, {"FEATURES": features}).model_version


def test_upload_push_serves_the_version_on_every_node_then_replaces_it(world):
    model = model_create(name="risk_score", team="fraud", actor=world["ada"])
    v1, v2 = _register(model, world["ada"], 1), _register(model, world["ada"], 2)
    cluster = _cluster(world)
    names = [(cluster.name, n.name) for n in cluster.nodes.all()]
    before = own_traffic.own_counts_read(names)

    first = _deploy(cluster, v1, world["rita"])
    assert first.status == "succeeded", first.error
    for row in first.nodes.all():
        assert row.status == "ready" and row.load_ms > 0 and row.warmup_ms > 0
    # Each node's warm-ups are counted as the control plane's own, not clients': Triton's
    # native one inside the load (one instance) and the push's inference.
    after = own_traffic.own_counts_read(names)
    for key in names:
        warm = ("risk_score", "1", own_traffic.WARMUP)
        was = before[key].get(warm, {}).get("success", 0.0)
        assert after[key][warm]["success"] == was + 2
    for node in world["fleet"].nodes:
        assert _loaded(node, "risk_score") == {"1"}
        assert _answering_version(node, "risk_score") == "1"

    second = _deploy(cluster, v2, world["rita"])
    assert second.status == "succeeded", second.error
    assert second.previous_versions == [1] and second.target_versions == [2]
    for node in world["fleet"].nodes:
        assert _loaded(node, "risk_score") == {"2"}  # v1 retired after the drain
        assert _answering_version(node, "risk_score") == "2"
    state = ServingState.objects.get(cluster=cluster, model=model)
    assert state.version_numbers() == [2]

    # Deleting a serving version is refused with the cluster named; then unload frees it.
    api = APIClient()
    api.force_authenticate(world["ada"])
    refused = api.delete("/api/v1/models/risk_score/versions/2/")
    assert refused.status_code == 409
    assert "serving on prod" in refused.json()["errors"][0]["message"]
    unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
    pushed(unload)
    for node in world["fleet"].nodes:
        assert _loaded(node, "risk_score") == set()
    # The deploys to this production cluster moved `production` (docs/API.md), and the
    # alias's history keeps every version it pointed to: v2 stays, for audit.
    assert model.aliases.get(name="production").version == v2
    held = api.delete("/api/v1/models/risk_score/versions/2/")
    assert held.status_code == 409 and "production" in held.json()["errors"][0]["message"]
    assert ModelVersion.objects.filter(model=model, version=2).count() == 1


def test_filesystem_push_writes_the_repository_atomically_and_serves(world):
    team_create(name="support", actor=world["ada"])
    model = model_create(name="ticket_router", team="support", actor=world["ada"])
    version = _register(model, world["ada"], 1, example="ticket_router")
    cluster = _cluster(world, name="fs", mode="filesystem")
    deployment = _deploy(cluster, version, world["rita"])
    assert deployment.status == "succeeded", deployment.error
    folder = world["fleet"].shared_repository / "ticket_router"
    assert (folder / "1" / "model.py").exists() and (folder / "config.pbtxt").exists()
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]
    # The native warm-up's text input, as Triton reads raw BYTES: length-prefixed words.
    sample = folder / "warmup" / "switchyard_0"
    size = int.from_bytes(sample.read_bytes()[:4], "little")
    assert size == len(sample.read_bytes()) - 4 and sample.read_bytes()[4:].isascii()
    written_at = sample.stat().st_mtime_ns
    again = _deploy(cluster, version, world["rita"])  # the same push again: nothing rewritten
    assert again.status == "succeeded", again.error
    assert sample.stat().st_mtime_ns == written_at
    for node in world["fleet"].nodes:
        assert _loaded(node, "ticket_router") == {"1"}
        with keyed_client(node) as client:
            index = {(e.name, e.version, e.state) for e in client.repository_index()}
        assert ("ticket_router", "1", "READY") in index  # from disk, so in the index
    unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
    pushed(unload)


_WARM_PROBE_CONFIG = b"""name: "warm_probe"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [
  { name: "SERVED_BEFORE" data_type: TYPE_INT64 dims: [ 1 ] },
  { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] }
]
instance_group [ { kind: KIND_CPU count: 2 } ]
"""

_WARM_PROBE_MODEL = b"""import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.served = 0

    def execute(self, requests):
        responses = []
        for _ in requests:
            time.sleep(0.3)  # long enough for concurrent requests to need both instances
            outputs = [
                pb_utils.Tensor("SERVED_BEFORE", np.array([self.served], dtype=np.int64)),
                pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64)),
            ]
            self.served += 1
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
"""


def test_every_instance_is_warmed_by_triton_before_the_version_is_ready(world):
    """A model with 2 instances: the push's one warm-up inference reaches only one of them,
    the native warm-up in the pushed config reaches both before READY."""
    from concurrent.futures import ThreadPoolExecutor

    team_create(name="probes", actor=world["ada"])
    model = model_create(name="warm_probe", team="probes", actor=world["ada"])
    archive = tar_gz([("config.pbtxt", _WARM_PROBE_CONFIG), ("1/model.py", _WARM_PROBE_MODEL)])
    version = model_version_register(model=model, archive=io.BytesIO(archive), actor=world["ada"])
    cluster = _cluster(world, name="warm")
    assert _deploy(cluster, version, world["rita"]).status == "succeeded"

    node = world["fleet"].nodes[0]
    with keyed_client(node) as client:
        served = client.model_config("warm_probe")
    warmups = served.get("model_warmup", [])
    assert [(w["name"], w["batch_size"]) for w in warmups] == [("switchyard", 1)]
    assert warmups[0]["inputs"]["X"]["input_data_file"] == "switchyard_0"

    def ask(_):
        with keyed_client(node) as client:
            result = client.infer("warm_probe", {"X": np.ones((1,), np.float32)})
        return int(result.outputs["PID"][0]), int(result.outputs["SERVED_BEFORE"][0])

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(ask, range(4)))
    assert len({pid for pid, _ in answers}) == 2, answers  # both instances answered
    first_per_instance = {pid: min(n for p, n in answers if p == pid) for pid, _ in answers}
    # An instance's first client request was never its first execution.
    assert min(first_per_instance.values()) >= 1, answers
    unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
    pushed(unload)


def test_node_down_during_a_push_fails_clearly_and_others_keep_the_previous_state(world):
    fleet = world["fleet"]
    model = model_create(name="risk_kill", team="fraud", actor=world["ada"])
    # The registry checks the config's name against the model: register under this name.
    v1 = register_risk_score_as(model, world["ada"], 1)
    v2 = register_risk_score_as(model, world["ada"], 2)
    cluster = _cluster(world, name="killed")
    assert _deploy(cluster, v1, world["rita"]).status == "succeeded"

    victim = fleet.nodes[2]
    fleet.kill(victim)
    try:
        failed = _deploy(cluster, v2, world["rita"])
        assert failed.status == "failed"
        assert f"{victim.name}:" in failed.error and "1 of 3 node(s)" in failed.error
        rows = {r.node.name: r for r in failed.nodes.select_related("node")}
        assert rows[victim.name].status == "failed" and rows[victim.name].error
        for node in fleet.nodes[:2]:
            assert rows[node.name].status == "reverted"
            assert _loaded(node, "risk_kill") == {"1"}
            assert _answering_version(node, "risk_kill") == "1"
        assert ServingState.objects.get(cluster=cluster, model=model).version_numbers() == [1]

        # Reconcile marks the dead node down once, not on every pass.
        cluster_reconcile(cluster=cluster)
        cluster_reconcile(cluster=cluster)
        assert DriftEvent.objects.filter(cluster=cluster, kind="node_down").count() == 1
    finally:
        fleet.restart(victim)
    # The node is back, empty (explicit mode): the next pass rehydrates it.
    assert _loaded(victim, "risk_kill") == set()
    cluster_reconcile(cluster=cluster)
    assert _loaded(victim, "risk_kill") == {"1"}
    kinds = set(DriftEvent.objects.filter(cluster=cluster).values_list("kind", flat=True))
    assert {"node_down", "node_up", "missing"} <= kinds
    assert cluster_reconcile(cluster=cluster) == []  # in sync: nothing more to do


def test_reconcile_retires_versions_loaded_behind_switchyards_back(world):
    fleet = world["fleet"]
    model = model_create(name="risk_drift", team="fraud", actor=world["ada"])
    v1 = register_risk_score_as(model, world["ada"], 1)
    v2 = register_risk_score_as(model, world["ada"], 2)
    cluster = _cluster(world, name="drift")
    assert _deploy(cluster, v2, world["rita"]).status == "succeeded"
    # Someone loads v1 and v2 by hand on one node.
    from deployments.push import apply_on_node, build_plan

    node_row = cluster.nodes.get(name=fleet.nodes[0].name)
    assert apply_on_node(node_row, build_plan([v1, v2], upload=True), warm_version=None).ok
    assert _loaded(fleet.nodes[0], "risk_drift") == {"1", "2"}
    events = cluster_reconcile(cluster=cluster)
    assert [(e.kind, e.model_name) for e in events] == [("unexpected", "risk_drift")]
    assert _loaded(fleet.nodes[0], "risk_drift") == {"2"}
    unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
    pushed(unload)


def test_corrupted_stored_file_is_refused_before_any_load(world):
    model = model_create(name="risk_corrupt", team="fraud", actor=world["ada"])
    v1 = register_risk_score_as(model, world["ada"], 1)
    cluster = _cluster(world, name="corrupt")
    entry = next(e for e in v1.manifest if e["path"] == "weights.npz")
    path = blob_path(entry["sha256"])
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, as a bad disk would
    path.write_bytes(bytes(data))
    deployment = _deploy(cluster, v1, world["rita"])
    assert deployment.status == "failed"
    assert "Refused before any load" in deployment.error and "weights.npz" in deployment.error
    assert set(deployment.nodes.values_list("status", flat=True)) == {"skipped"}
    for node in world["fleet"].nodes:
        assert _loaded(node, "risk_corrupt") == set()


def test_smoke_validation_loads_under_a_temporary_name_and_records_the_result(world):
    model = model_create(name="risk_smoke", team="fraud", actor=world["ada"])
    version = register_risk_score_as(model, world["ada"], 2)
    _cluster(world, name="staging", environment="staging")
    report = model_version_smoke_validate(version_id=version.pk)
    assert report["passed"] is True, report
    assert report["output_shapes"] == {"SCORE": [1, 1]} and report["latency_ms"] > 0
    assert report["native_warmup"] is True
    version.refresh_from_db()
    assert version.status == "smoke_passed" and version.validation["smoke"] == report
    for node in world["fleet"].nodes:
        with keyed_client(node) as client:
            assert not [m for m in client.loaded_models() if "--smoke-" in m]


def test_deploy_and_cluster_apis_are_for_release_managers(world):
    model = model_create(name="risk_api", team="fraud", actor=world["ada"])
    register_risk_score_as(model, world["ada"], 1)
    cluster = _cluster(world, name="api")
    for user in (world["ada"], None):
        api = APIClient()
        if user:
            api.force_authenticate(user)
        response = api.post(
            "/api/v1/deployments/",
            {"cluster": "api", "model": "risk_api", "version": 1},
            format="json",
        )
        assert response.status_code == (403 if user else 401)
        assert api.post(
            "/api/v1/clusters/", {"name": "x", "environment": "staging"}, format="json"
        ).status_code == (403 if user else 401)
    assert not Deployment.objects.filter(cluster=cluster).exists()
    api = APIClient()
    api.force_authenticate(world["ada"])
    status = api.get("/api/v1/clusters/api/status/").json()  # everyone signed in reads
    assert [n["health"] for n in status["nodes"]] == ["up", "up", "up"]


def test_cluster_api_validates_input(world):
    api = APIClient()
    api.force_authenticate(world["rita"])
    bad = api.post(
        "/api/v1/clusters/",
        {"name": "fs2", "environment": "staging", "push_mode": "filesystem"},
        format="json",
    )
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "repository_path"
    ok = api.post(
        "/api/v1/clusters/",
        {
            "name": "edge",
            "environment": "production",
            "gpu_type": "L4",
            "router": {
                "driver": "nginx",
                "url": "http://127.0.0.1:9000",
                "listen": "127.0.0.1:9000",
            },
            "metrics": {"source": "scrape"},
            "node_hourly_cost": "1.25",
        },
        format="json",
    )
    assert ok.status_code == 201, ok.content
    body = api.get("/api/v1/clusters/edge/").json()
    assert body["router"] == {
        "driver": "nginx",
        "url": "http://127.0.0.1:9000",
        "listen": "127.0.0.1:9000",
    }
    node = api.post(
        "/api/v1/clusters/edge/nodes/",
        {"name": "n1", "http_url": "http://127.0.0.1:1"},
        format="json",
    )
    assert node.status_code == 201
    dup = api.post(
        "/api/v1/clusters/edge/nodes/",
        {"name": "n1", "http_url": "http://127.0.0.1:2"},
        format="json",
    )
    assert dup.status_code == 409
    assert dup.json()["errors"][0]["message"] == "A node named 'n1' in edge already exists."


@pytest.mark.django_db(transaction=True)
def test_deployment_api_runs_in_a_real_worker(world, celery_worker):
    model = model_create(name="risk_worker", team="fraud", actor=world["ada"])
    register_risk_score_as(model, world["ada"], 1)
    _cluster(world, name="worker")
    api = APIClient()
    api.force_authenticate(world["rita"])
    from controlplane.celery import app

    default_queue, app.conf.task_default_queue = app.conf.task_default_queue, celery_worker.queue
    try:
        response = api.post(
            "/api/v1/deployments/",
            {"cluster": "worker", "model": "risk_worker", "version": 1},
            format="json",
        )
    finally:
        app.conf.task_default_queue = default_queue
    assert response.status_code == 202, response.content
    deployment_id = response.json()["id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = api.get(f"/api/v1/deployments/{deployment_id}/").json()
        if body["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.3)
    assert body["status"] == "succeeded", body
    assert [n["status"] for n in body["nodes"]] == ["ready", "ready", "ready"]
    assert all(n["load_ms"] > 0 and n["warmup_ms"] > 0 for n in body["nodes"])
    unload = api.post("/api/v1/clusters/worker/models/risk_worker/unload/")
    assert unload.status_code == 202


def _stub_children(pid: int) -> set[int]:
    """Python backend stubs the tritonserver process `pid` runs (one per loaded or loading
    python model version)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and argv and argv[0].endswith(b"triton_python_backend_stub"):
            found.add(int(entry.name))
    return found


def _register_slow_loading(model, user):
    """risk_score v2 whose initialize takes 6 s, so a node can be killed in the middle."""
    entries = example_entries("risk_score", 2)
    config = entries[0][1].replace(b'name: "risk_score"', f'name: "{model.name}"'.encode())
    files = []
    for name, data in entries[1:]:
        if name.endswith("model.py"):
            data = data.replace(
                b"    def initialize(self, args):\n",
                b"    def initialize(self, args):\n        import time\n\n        time.sleep(6)\n",
            )
            assert b"time.sleep(6)" in data
        files.append((name, data))
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *files]))
    return model_version_register(model=model, archive=archive, actor=user)


@pytest.mark.django_db(transaction=True)
def test_node_killed_in_the_middle_of_its_load_fails_clearly_and_others_go_back(world):
    import threading

    from django.db import connection

    from deployments.models import DeploymentNode

    fleet = world["fleet"]
    model = model_create(name="risk_midkill", team="fraud", actor=world["ada"])
    v1 = register_risk_score_as(model, world["ada"], 1)
    slow = _register_slow_loading(model, world["ada"])
    cluster = _cluster(world, name="midkill")
    assert _deploy(cluster, v1, world["rita"]).status == "succeeded"

    deployment = deployment_create(cluster=cluster, version=slow, actor=world["rita"])

    def run() -> None:
        try:
            deployment_run(deployment_id=deployment.pk)
        finally:
            connection.close()

    runner = threading.Thread(target=run)
    victim = fleet.nodes[1]
    before = {node.name: _stub_children(node.process.pid) for node in fleet.nodes}

    def initializing() -> bool:
        """Every node runs a new stub (the new version's) that is not READY yet."""
        rows = DeploymentNode.objects.filter(deployment=deployment, status="loading")
        if rows.count() < len(fleet.nodes):
            return False
        for node in fleet.nodes:
            if not _stub_children(node.process.pid) - before[node.name]:
                return False
            with keyed_client(node) as client:
                if client.model_ready("risk_midkill", "2"):
                    return False
        return True

    runner.start()
    try:
        wait_for(initializing, timeout_s=60, what="every node inside the new version's load")
        fleet.kill(victim)
        runner.join(120)
    finally:
        fleet.restart(victim)
    done = Deployment.objects.get(pk=deployment.pk)
    assert done.status == "failed" and f"{victim.name}:" in done.error
    rows = {r.node.name: r.status for r in done.nodes.select_related("node")}
    assert rows[victim.name] == "failed"
    for node in (fleet.nodes[0], fleet.nodes[2]):
        assert rows[node.name] == "reverted"
        assert _loaded(node, "risk_midkill") == {"1"}
    cluster_reconcile(cluster=cluster)  # the restarted node gets v1 back
    assert _loaded(victim, "risk_midkill") == {"1"}


def test_removing_a_node_keeps_its_history_and_waits_for_running_deployments(world, client):
    model = model_create(name="risk_shrink", team="fraud", actor=world["ada"])
    v1 = register_risk_score_as(model, world["ada"], 1)
    cluster = _cluster(world, name="shrink")
    first = _deploy(cluster, v1, world["rita"])
    assert first.status == "succeeded", first.error
    gone = world["fleet"].nodes[2].name
    url = f"/api/v1/clusters/shrink/nodes/{gone}/"

    api = APIClient()
    api.force_authenticate(world["ada"])
    assert api.delete(url).status_code == 403  # release managers only
    api.force_authenticate(world["rita"])
    assert api.get(url).json()["name"] == gone
    assert api.delete("/api/v1/clusters/shrink/nodes/nope/").status_code == 404
    pending = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
    refused = api.delete(url)
    assert refused.status_code == 409
    assert f"Deployment {pending.pk}" in refused.json()["errors"][0]["message"]
    pending.delete()

    assert api.delete(url).status_code == 204
    assert sorted(n.name for n in cluster.nodes.all()) == sorted(
        n.name for n in world["fleet"].nodes[:2]
    )
    history = api.get(f"/api/v1/deployments/{first.pk}/").json()
    assert gone in [row["node"] for row in history["nodes"]]  # the row keeps the name
    client.force_login(world["rita"])
    assert gone in client.get(f"/deployments/{first.pk}/progress/").content.decode()
    assert AuditEvent.objects.filter(action="node.removed", object_repr__endswith=gone).exists()

    # The cluster now serves on the two nodes left; the removed one is not touched.
    unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
    done = deployment_run(deployment_id=unload.pk)
    assert done.status == "succeeded" and done.nodes.count() == 2
    assert _loaded(world["fleet"].nodes[2], "risk_shrink") == {"1"}
    with keyed_client(world["fleet"].nodes[2]) as c:
        c.unload("risk_shrink")


def test_a_load_that_would_leave_a_node_short_of_memory_is_refused_with_the_numbers(
    world, settings
):
    """Triton's own memory gauges against the version's files and the reserve: with a reserve
    no node has, the deployment fails on every node before any load and names the figures;
    with the default one the same version loads."""
    model = model_create(name="risk_mem", team="fraud", actor=world["ada"])
    version = register_risk_score_as(model, world["ada"], 1)
    cluster = _cluster(world, name="mem")
    settings.SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES = 2**50  # a PiB kept free: nobody has it
    refused = _deploy(cluster, version, world["rita"])
    assert refused.status == "failed", refused.error
    assert "not enough memory:" in refused.error and "GiB free" in refused.error
    assert "stays free (SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES)" in refused.error
    for node in world["fleet"].nodes:
        assert _loaded(node, "risk_mem") == set()  # nothing was loaded anywhere
    settings.SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES = 256 * 2**20
    done = _deploy(cluster, version, world["rita"])
    assert done.status == "succeeded", done.error
    for node in world["fleet"].nodes:
        assert _loaded(node, "risk_mem") == {"1"}
    pushed(deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"]))
