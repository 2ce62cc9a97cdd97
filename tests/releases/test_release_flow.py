"""Gray releases end to end: real Triton nodes, a real nginx router, steady client traffic
through the router, ticks run by the session's releases-lane worker with `releases.tick_active`
queued on a timer as beat does, and the loads they start run by its fleet-lane worker
(tests/ticking.py)."""

import json
import threading
import time
from http.client import HTTPConnection, RemoteDisconnected

import numpy as np
import pytest
from rest_framework.test import APIClient

from deployments.executor import deployment_run
from deployments.services import cluster_create, deployment_create
from integrations.triton.local import free_ports
from models_registry.services import model_create, team_create
from releases import routing
from releases.models import Release
from releases.services import release_action, release_create
from tests.conftest import wait_for
from tests.deploying import pushed
from tests.nodes import keyed_client, register_nodes
from tests.registry.archives import register_risk_score_as
from tests.ticking import Ticking

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

# A connection closed under a request, before any response byte came back.
RESETS = (RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class Traffic:
    """Keep-alive clients sending inference through the router. A connection the server
    closed before any response byte (nginx reloads close idle ones) is a reset, counted in
    `resets`, and that request is sent once more on a new connection (`retries`); any other
    error, and a reset of the retry, is a failed request. Tests assert all three:
    `retries_allowed` is how many a number of router reloads may cause."""

    def __init__(
        self,
        port: int,
        model: str,
        clients: int = 3,
        pause_s: float = 0.01,
        *,
        input_name: str = "FEATURES",
        scale: float = 1.0,
    ):
        self.port, self.model, self.pause_s, self.clients = port, model, pause_s, clients
        self.ok = self.failed = self.retries = self.resets = 0
        self.versions: dict[str, int] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        body = {
            "inputs": [
                {"name": input_name, "datatype": "FP32", "shape": [1, 128], "data": [0.0] * 128}
            ]
        }
        self._rng = np.random.default_rng(5)
        self._bodies = []
        for _ in range(64):
            row = (self._rng.normal(size=128) * scale).astype(float).tolist()
            body["inputs"][0]["data"] = row
            self._bodies.append(json.dumps(body))
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(clients)]

    def retries_allowed(self, reloads: int) -> int:
        """A reload closes each client's idle keep-alive connection at most once."""
        return self.clients * reloads

    def more(self, n: int, timeout_s: float = 60.0) -> None:
        """Wait until `n` more requests were answered 200 (traffic flows)."""
        target = self.ok + n
        wait_for(lambda: self.ok >= target, timeout_s=timeout_s, what=f"{n} answered requests")

    def summary(self) -> str:
        return (
            f"ok={self.ok} failed={self.failed} resets={self.resets} retries={self.retries} "
            f"errors={self.errors[:3]}"
        )

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(10)

    def _send(self, conn, body):
        conn.request(
            "POST",
            f"/v2/models/{self.model}/infer",
            body=body,
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        return response.status, response.read()

    def _run(self, index: int) -> None:
        conn = HTTPConnection("127.0.0.1", self.port, timeout=10)
        n = 0
        while not self._stop.is_set() and n < 20000:
            body = self._bodies[(index * 7 + n) % len(self._bodies)]
            n += 1
            try:
                status, data = self._send(conn, body)
            except RESETS:
                conn.close()
                conn = HTTPConnection("127.0.0.1", self.port, timeout=10)
                with self._lock:
                    self.resets += 1
                    self.retries += 1
                try:
                    status, data = self._send(conn, body)
                except OSError as exc:
                    with self._lock:
                        self.resets += isinstance(exc, RESETS)
                    conn.close()
                    conn = HTTPConnection("127.0.0.1", self.port, timeout=10)
                    status, data = 0, str(exc).encode()
            except OSError as exc:
                status, data = 0, str(exc).encode()
            with self._lock:
                if status == 200:
                    self.ok += 1
                    version = json.loads(data)["model_version"]
                    self.versions[version] = self.versions.get(version, 0) + 1
                else:
                    self.failed += 1
                    self.errors.append(f"{status} {data[:200]!r}")
            time.sleep(self.pause_s)
        conn.close()


def routed_cluster(triton_cluster, settings, tmp_path, make_user, *, name="canary", grpc=False):
    """A cluster of the test's Triton nodes behind a real nginx router of its own (a gRPC
    listener too with `grpc`), its release manager and algorithm engineer; yields the world
    dict, stops the router after."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_DEPLOY_DRAIN_S = 0.2
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    port, grpc_port = free_ports(2)
    router = {
        "driver": "nginx",
        "listen": f"127.0.0.1:{port}",
        "url": f"http://127.0.0.1:{port}",
        "prefix_dir": str(tmp_path / "router"),
    }
    if grpc:
        router["grpc_listen"] = f"127.0.0.1:{grpc_port}"
    # The cluster's own key (not the test settings' default): releases send it on every load.
    key = triton_cluster.node_key.value
    cluster = cluster_create(
        actor=rita, name=name, environment="production", router=router, api_key=key
    )
    register_nodes(cluster, triton_cluster.nodes, actor=rita)
    world = {
        "rita": rita,
        "ada": ada,
        "cluster": cluster,
        "port": port,
        "grpc_port": grpc_port if grpc else None,
        "nodes": triton_cluster.nodes,
    }
    try:
        yield world
    finally:
        routing.router_for(cluster).stop()
        routing._DRIVERS.clear()
        _unload_left_behind(triton_cluster)


def _unload_left_behind(fleet) -> None:
    """Unload from the shared nodes every model of this test still loaded (a test that
    failed before its own unload would leave it for the next tests to find)."""
    from models_registry.models import Model

    mine = set(Model.objects.values_list("name", flat=True))
    for node in fleet.nodes:
        with keyed_client(node) as client:
            for name in mine & set(client.loaded_models()):
                client.unload(name)
                client.wait_unloaded(name)


@pytest.fixture
def release_world(triton_cluster, settings, tmp_path, make_user):
    yield from routed_cluster(triton_cluster, settings, tmp_path, make_user)


@pytest.fixture
def ticking(release_world, lanes, settings):
    """release_world's releases ticked by the session's lane workers while the test runs (the
    artifacts it registers go where those workers read them); waits for them to go idle after."""
    settings.SWITCHYARD_STORAGE_ROOT = lanes.storage
    with Ticking(lanes) as loop:
        yield loop


def _model_serving(world, name: str, sla: dict, variant: int = 1):
    """A new model with `variant` registered, deployed on the cluster and pinned through
    the router (before any release exists): (model, that version)."""
    model = model_create(name=name, team="fraud", actor=world["ada"], sla=sla)
    baseline = register_risk_score_as(model, world["ada"], variant)
    deployment = deployment_create(cluster=world["cluster"], version=baseline, actor=world["rita"])
    pushed(deployment)
    routing.router_for(world["cluster"]).apply(routing.router_state(world["cluster"], []))
    return model, baseline


def _model_with_baseline(
    world, name: str, candidate_variant: int, sla: dict, baseline_variant: int = 1, **faults
):
    """A model serving `baseline_variant` through the router, and a registered candidate
    (`faults` for the faulty-by-setting variant 5: failure_rate, extra_ms)."""
    model, baseline = _model_serving(world, name, sla, baseline_variant)
    candidate = register_risk_score_as(model, world["ada"], candidate_variant, **faults)
    return model, baseline, candidate


def _tick_until(ticking: Ticking, release, phases: set[str], timeout_s: float = 120.0):
    """The stored release once the lanes' ticks put it in one of `phases`."""
    return ticking.phase(release.pk, phases, timeout_s)


def _loaded(world, model: str) -> list[set[str]]:
    out = []
    for node in world["nodes"]:
        with keyed_client(node) as client:
            out.append(client.loaded_models().get(model, set()))
    return out


def router_reloads(release) -> int:
    """How many router splits the release applied (each an nginx reload)."""
    return release.events.filter(kind="effect", message__startswith="router:").count()


def assert_retries_within(traffic: Traffic, *releases, reloads: int = 0) -> None:
    """The traffic's retries are what the releases' router reloads (plus `reloads` more) may
    cause, and no more."""
    reloads += sum(router_reloads(r) for r in releases)
    assert traffic.retries <= traffic.retries_allowed(reloads), (reloads, traffic.summary())


def _unload(world, model) -> None:
    unload = deployment_create(
        cluster=world["cluster"], version=None, model=model, actor=world["rita"]
    )
    deployment_run(deployment_id=unload.pk)


def test_good_candidate_walks_every_step_and_is_promoted_with_no_failed_requests(
    release_world, ticking
):
    world = release_world
    model, baseline, candidate = _model_with_baseline(
        world, "rel_good", 2, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    with Traffic(world["port"], "rel_good") as traffic:
        traffic.more(20)
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[20, 50, 100],
            step_interval_s=2,
            analysis={"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5},
            drain_s=0.5,
            progress_deadline_s=60,
        )
        release = _tick_until(ticking, release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        ticks = ticking.ticks()
        traffic.more(100)  # the promoted version answers on
    assert release.phase == "SUCCEEDED", (
        release.reason,
        list(release.events.values_list("message", flat=True)),
    )
    assert traffic.failed == 0, traffic.summary()
    assert traffic.ok > 100 and set(traffic.versions) == {"1", "2"}
    reloads = router_reloads(release)
    assert traffic.retries <= traffic.retries_allowed(reloads), (reloads, traffic.summary())
    assert traffic.resets == traffic.retries, traffic.summary()  # no retry was reset again
    print(f"requests {traffic.summary()}, router reloads {reloads}")
    kinds = list(release.events.values_list("kind", flat=True))
    assert kinds.count("analysis") >= 3
    judged = [e.data["judge"] for e in release.events.filter(kind="analysis")]
    assert any(j["latency_p_value"] is not None for j in judged)  # recorded with the gates
    steps = [e.message for e in release.events.filter(kind="effect")]
    assert any("20% to v2" in m for m in steps) and any("100% to v2" in m for m in steps)
    assert model.aliases.get(name="production").version_id == candidate.pk
    assert _loaded(world, "rel_good") == [{"2"}, {"2"}]
    # Ticks that changed nothing wrote nothing (about 4 ticks per 2 s step, a few writes each).
    stored = Release.objects.get(pk=release.pk)
    assert stored.revision == release.revision < ticks - 5, (stored.revision, ticks)
    _unload(world, model)


def test_faulty_candidate_is_rolled_back_by_the_gates_without_a_human(release_world, ticking):
    world = release_world
    model, baseline, candidate = _model_with_baseline(
        world, "rel_faulty", 3, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    with Traffic(world["port"], "rel_faulty") as traffic:
        traffic.more(20)
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[25, 50, 100],
            step_interval_s=2,
            analysis={"min_requests": 10, "max_failed_checks": 1},
            drain_s=0.5,
            progress_deadline_s=60,
        )
        release = _tick_until(ticking, release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
    assert release.phase == "ROLLED_BACK", release.reason
    why = " ".join(release.events.filter(kind="phase").values_list("message", flat=True))
    assert "ROLLING_BACK" in why and ("success" in why or "error" in why), why
    assert _loaded(world, "rel_faulty") == [{"1"}, {"1"}]
    assert not model.aliases.filter(name="production", version=candidate).exists()
    # Only the candidate's share failed, and the baseline kept answering.
    assert traffic.versions.get("1", 0) > 0 and traffic.failed < traffic.ok
    reloads = router_reloads(release)
    assert traffic.retries <= traffic.retries_allowed(reloads), (reloads, traffic.summary())
    _unload(world, model)


def test_manual_gate_waits_until_approved(release_world, ticking):
    world = release_world
    model, baseline, candidate = _model_with_baseline(
        world, "rel_gate", 2, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    with Traffic(world["port"], "rel_gate") as traffic:
        traffic.more(20)
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[50, 100],
            step_interval_s=2,
            manual_gates=[100],
            analysis={"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5},
            drain_s=0.5,
            progress_deadline_s=60,
        )
        release = _tick_until(ticking, release, {"WAITING_APPROVAL"})
        ticking.more_ticks(5)  # ticks ran at the gate, and it held
        release = Release.objects.get(pk=release.pk)
        assert release.phase == "WAITING_APPROVAL" and release.candidate_weight == 50
        api = APIClient()
        api.force_authenticate(world["ada"])
        denied = api.post(
            f"/api/v1/releases/{release.pk}/actions/", {"action": "approve"}, format="json"
        )
        assert denied.status_code == 403
        api.force_authenticate(world["rita"])
        wrong = api.post(
            f"/api/v1/releases/{release.pk}/actions/", {"action": "resume"}, format="json"
        )
        assert wrong.status_code == 409
        release_action(release=release, action="approve", actor=world["rita"], reason="looks good")
        release = _tick_until(ticking, release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
    assert release.phase == "SUCCEEDED", release.reason
    assert traffic.failed == 0, traffic.summary()
    reloads = router_reloads(release)
    assert traffic.retries <= traffic.retries_allowed(reloads), (reloads, traffic.summary())
    actors = set(release.events.exclude(actor="").values_list("actor", flat=True))
    assert "rita" in actors
    _unload(world, model)
