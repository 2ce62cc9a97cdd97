"""The nginx router driver: a real nginx in front of the two real Triton nodes of the session.

The model is risk_score versions 1 and 2 under a unique name, loaded on both nodes over gRPC
and unloaded at the end. Without a router Triton answers unversioned requests with version 2
(the highest READY one, docs/TRITON.md §versions); every split below comes from nginx alone.
Measured numbers are printed with a `MEASURED` prefix (run with -s to see them).
"""

import contextlib
import http.client
import json
import os
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient

from integrations.routers import ModelRoute, RouterError, RouterState
from integrations.routers.access_log import AccessLogTail, parse_line, summarize
from integrations.routers.nginx import NginxRouter
from integrations.triton.local import free_ports
from tests.exampledata import example_config_json, example_files
from tests.nodes import example_on_every_node, grpc_key

pytestmark = pytest.mark.triton

BODY = json.dumps(
    {
        "inputs": [
            {
                "name": "FEATURES",
                "datatype": "FP32",
                "shape": [1, 128],
                "data": [round(0.01 * i, 2) for i in range(128)],
            }
        ]
    }
).encode()


@pytest.fixture(scope="module", name="model")
def risk_pair(triton_cluster):
    """risk_score v1 and v2 under a unique name on every node; unloaded afterwards (also the
    `model` of tests/integration/test_nginx_grpc.py)."""
    name = f"risk_route_t{uuid.uuid4().hex[:6]}"
    with example_on_every_node(triton_cluster, "risk_score", name=name, versions=[1, 2]):
        yield name


@pytest.fixture
def upstreams(triton_cluster) -> list[str]:
    return [node.http_url for node in triton_cluster.nodes]


@pytest.fixture
def router(tmp_path):
    """An nginx router of this test's own, always stopped."""
    (port,) = free_ports(1)
    driver = NginxRouter(prefix_dir=tmp_path / "nginx", listen=f"127.0.0.1:{port}")
    try:
        yield driver
    finally:
        driver.stop()


def route_state(upstreams, model, weights, sticky_header=None) -> RouterState:
    return RouterState(upstreams, [ModelRoute(model, weights, sticky_header=sticky_header)])


class InferClient:
    """One kept-alive connection; retries once only when no response byte came back."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.retries = 0

    def infer(self, model: str, headers: dict | None = None) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json", **(headers or {})}
        for attempt in range(2):
            try:
                self.conn.request("POST", f"/v2/models/{model}/infer", BODY, headers)
                response = self.conn.getresponse()
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                self.conn.close()
                if attempt:
                    raise
                self.retries += 1
                continue
            return response.status, json.loads(response.read() or b"{}")
        raise AssertionError("unreachable")

    def version(self, model: str, headers: dict | None = None) -> str:
        status, body = self.infer(model, headers)
        assert status == 200, body
        return body["model_version"]

    def close(self) -> None:
        self.conn.close()


def versions_of(router: NginxRouter, model: str, count: int, headers=None) -> Counter:
    client = InferClient(router.port)
    try:
        versions = Counter(client.version(model, headers) for _ in range(count))
    finally:
        client.close()
    assert client.retries == 0, "a connection was reset with no reload under it"
    return versions


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, NotADirectoryError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def test_pinned_route_answers_every_unversioned_request_with_that_version(
    router, model, upstreams, triton_cluster
):
    direct = InferClient(int(upstreams[0].rsplit(":", 1)[1]))
    assert direct.version(model) == "2"  # Triton alone: the highest READY version
    direct.close()
    result = router.apply(route_state(upstreams, model, {1: 100.0, 2: 0.0}))
    assert result.changed and result.started
    assert versions_of(router, model, 40) == Counter({"1": 40})


def test_weighted_split_sends_about_its_share_to_each_version(router, model, upstreams):
    router.apply(route_state(upstreams, model, {1: 80.0, 2: 20.0}))
    seen = versions_of(router, model, 400)
    share = seen["2"] / 400
    print(f"MEASURED split 80/20 over 400 requests: v2 share {share:.1%} ({dict(seen)})")
    assert 0.12 <= share <= 0.28


def test_sticky_header_keeps_a_user_on_one_version_and_spreads_users(router, model, upstreams):
    router.apply(route_state(upstreams, model, {1: 50.0, 2: 50.0}, sticky_header="x-user-id"))
    one_user = versions_of(router, model, 50, headers={"x-user-id": "user-42"})
    assert len(one_user) == 1 and sum(one_user.values()) == 50
    per_user = {
        user: versions_of(router, model, 3, headers={"x-user-id": user})
        for user in (f"user-{i}" for i in range(40))
    }
    assert all(len(seen) == 1 for seen in per_user.values())
    assert Counter(next(iter(seen)) for seen in per_user.values()).keys() == {"1", "2"}
    no_header = versions_of(router, model, 60)
    assert no_header.keys() == {"1", "2"}  # without the header: per request


def test_applying_the_same_state_again_does_not_reload(router, model, upstreams):
    state = route_state(upstreams, model, {1: 90.0, 2: 10.0})
    first = router.apply(state)
    workers = children_of(router.master_pid())
    second = router.apply(state)
    assert first.changed and not second.changed
    assert second.generation == first.generation
    assert children_of(router.master_pid()) == workers
    assert router.current() == state


class SteadyTraffic:
    """Client threads sending inference on their own kept-alive connections until exit."""

    def __init__(self, port: int, model: str, clients: int = 4) -> None:
        self.model = model
        self.stop = threading.Event()
        self.clients = [InferClient(port) for _ in range(clients)]
        self.counts = [Counter() for _ in self.clients]
        self.threads = [
            threading.Thread(target=self._send, args=pair)
            for pair in zip(self.clients, self.counts, strict=True)
        ]

    def _send(self, client: InferClient, counts: Counter) -> None:
        while not self.stop.is_set():
            try:
                status, body = client.infer(self.model)
                counts[body.get("model_version", f"status {status}")] += 1
            except Exception as exc:  # every failure is counted, none is retried again
                counts[f"failed {type(exc).__name__}"] += 1
                client.conn.close()

    def __enter__(self) -> "SteadyTraffic":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)
        for client in self.clients:
            client.close()

    @property
    def total(self) -> Counter:
        return sum(self.counts, Counter())

    @property
    def retries(self) -> int:
        return sum(client.retries for client in self.clients)


def test_reloads_under_steady_keepalive_traffic_fail_no_request(router, model, upstreams):
    router.apply(route_state(upstreams, model, {1: 100.0}))
    with SteadyTraffic(router.port, model) as traffic:
        for weights in ({1: 90.0, 2: 10.0}, {1: 50.0, 2: 50.0}, {1: 10.0, 2: 90.0}):
            time.sleep(0.7)
            assert router.apply(route_state(upstreams, model, weights)).changed
        time.sleep(0.7)
    total = traffic.total
    failures = {key: n for key, n in total.items() if key not in ("1", "2")}
    print(f"MEASURED 3 reloads, 4 keep-alive clients: {dict(total)}, retries {traffic.retries}")
    assert failures == {}
    # A reload closes each idle keep-alive connection at most once: that is each retry.
    assert traffic.retries <= len(traffic.clients) * 3, (traffic.retries, dict(total))
    assert total["1"] + total["2"] > 100 and total["2"] > 0


def test_config_nginx_refuses_is_not_installed_and_the_old_one_keeps_serving(
    router, model, upstreams
):
    good = route_state(upstreams, model, {1: 100.0})
    router.apply(good)
    before = router.config_path.read_text()
    with pytest.raises(RouterError) as refused:
        router.apply(route_state(["http://127.0.0.1:0"], model, {2: 100.0}))
    assert "refused the router config" in refused.value.message
    assert "invalid port" in refused.value.detail
    assert router.config_path.read_text() == before
    assert not list(router.prefix.glob("*.tmp"))
    assert router.current() == good
    assert versions_of(router, model, 20) == Counter({"1": 20})


def test_access_log_summary_matches_what_clients_received(router, model, upstreams):
    router.apply(route_state(upstreams, model, {1: 70.0, 2: 30.0}, sticky_header="x-user-id"))
    tail = AccessLogTail.from_end(router.access_log_path)
    sent = versions_of(router, model, 150) + versions_of(
        router, model, 50, headers={"x-user-id": "u-7"}
    )
    lines: list[str] = []
    deadline = time.monotonic() + 10
    while len(lines) < 200 and time.monotonic() < deadline:
        lines += tail.read_lines()
        time.sleep(0.05)
    summary = summarize(lines)
    seen = {str(version): row["requests"] for (name, version), row in summary.items()}
    print(f"MEASURED access log {seen} vs client {dict(sent)}")
    assert all(name == model for name, _ in summary)
    assert seen == dict(sent)
    assert all(row["errors"] == 0 and row["client_errors"] == 0 for row in summary.values())
    assert all(row["latency_ms_p99"] >= row["latency_ms_avg"] > 0 for row in summary.values())


@pytest.mark.skipif(os.geteuid() != 0, reason="raising a priority back takes root")
def test_nginx_started_from_a_niced_control_plane_thread_serves_at_normal_priority(
    router, model, upstreams
):
    def niced_apply():
        os.nice(10)  # Linux: this thread only, as a `nice -n 10` Celery worker would be
        router.apply(route_state(upstreams, model, {1: 100.0}))

    worker = threading.Thread(target=niced_apply)
    worker.start()
    worker.join(60)
    master = router.master_pid()
    for pid in [master, *children_of(master)]:
        with open(f"/proc/{pid}/stat") as stat:
            assert int(stat.read().rsplit(")", 1)[1].split()[16]) == 0, pid  # field 19: nice
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0  # the test's own thread was not touched


def test_once_apply_returns_no_new_connection_meets_the_previous_config(router, model, upstreams):
    """After a reload the old worker accepts connections until it handles its QUIT: apply
    waits for that, so a weight change (a rollback to 0%) is whole when it returns."""
    states = [route_state(upstreams, model, {1: 100.0}), route_state(upstreams, model, {2: 100.0})]
    router.apply(states[0])
    for i in range(1, 21):
        router.apply(states[i % 2])
        assert [router.current() for _ in range(3)] == [states[i % 2]] * 3, f"apply {i}"


def test_a_cluster_without_nodes_gets_503_until_nodes_come(router, model, upstreams):
    """nginx refuses an empty upstream block: with no node the router says why instead."""
    router.apply(RouterState([], [ModelRoute(model, {1: 100.0})]))
    conn = http.client.HTTPConnection("127.0.0.1", router.port, timeout=10)
    try:
        conn.request("POST", f"/v2/models/{model}/infer", BODY)
        response = conn.getresponse()
        assert response.status == 503
        assert b"no Triton node registered" in response.read()
    finally:
        conn.close()
    router.apply(route_state(upstreams, model, {1: 100.0}))
    client = InferClient(router.port)
    try:
        assert client.version(model) == "1"
    finally:
        client.close()


def test_stop_leaves_no_nginx_process(router, model, upstreams):
    router.apply(route_state(upstreams, model, {1: 100.0}))
    master = router.master_pid()
    workers = children_of(master)
    assert master and workers
    router.stop()
    assert router.master_pid() is None
    assert not any(alive(pid) for pid in [master, *workers])
    assert router.current() is None


@contextlib.contextmanager
def sibling_loaded(triton_cluster, model: str, delay_us: int):
    """v2 loaded beside `model` on every node under `<model>--c2`, with a dynamic batching
    delay of its own; yields (sibling name, a gRPC client of the first node, its key
    headers); unloaded after."""
    sibling = f"{model}--c2"
    config = json.loads(example_config_json("risk_score", name=sibling, versions=[2]))
    config["dynamic_batching"] = {"max_queue_delay_microseconds": str(delay_us)}
    clients = [grpcclient.InferenceServerClient(node.grpc_url) for node in triton_cluster.nodes]
    key = grpc_key(triton_cluster.nodes[0])
    try:
        for client in clients:
            client.load_model(
                sibling, config=json.dumps(config), files=example_files("risk_score", 2),
                headers=key, client_timeout=60,
            )  # fmt: skip
        yield sibling, clients[0], key
    finally:
        for client in clients:
            try:
                client.unload_model(sibling, headers=key, client_timeout=60)
            finally:
                client.close()


def test_a_version_under_a_sibling_name_takes_its_share_and_is_logged_as_the_model(
    router, model, upstreams, triton_cluster
):
    """A config canary: v2 served beside the model under `<model>--c2` with a config of its
    own (another batching delay); clients call the model's name, the router rewrites v2's
    share."""
    with sibling_loaded(triton_cluster, model, 2000) as (sibling, first, key):
        served = first.get_model_config(sibling, as_json=True, headers=key)["config"]
        own = first.get_model_config(model, as_json=True, headers=key)["config"]
        delays = [c["dynamic_batching"]["max_queue_delay_microseconds"] for c in (own, served)]
        assert delays == ["500", "2000"]
        route = ModelRoute(model, {1: 50.0, 2: 50.0}, targets={2: sibling})
        router.apply(RouterState(upstreams, [route]))
        tail = AccessLogTail.from_end(router.access_log_path)
        client = InferClient(router.port)
        answered = Counter()
        for _ in range(100):
            status, body = client.infer(model)
            assert status == 200, body
            answered[(body["model_name"], body["model_version"])] += 1
        client.close()
        assert set(answered) == {(model, "1"), (sibling, "2")}, answered
        lines: list[str] = []
        deadline = time.monotonic() + 10
        while len(lines) < 100 and time.monotonic() < deadline:
            lines += tail.read_lines()
            time.sleep(0.05)
        logged = {key: row["requests"] for key, row in summarize(lines).items()}
        assert logged == {(model, 1): answered[(model, "1")], (model, 2): answered[(sibling, "2")]}
        router.apply(RouterState(upstreams, [ModelRoute(model, {2: 100.0}, targets={2: sibling})]))
        assert versions_of(router, model, 20) == Counter({"2": 20})


def test_a_shadow_mirrors_its_share_to_a_slow_sibling_and_clients_only_get_the_baseline(
    router, model, upstreams, triton_cluster
):
    """A shadow: v2 under `<model>--c2` with a 300 ms batching delay gets a copy of half the
    clients' requests; clients get v1's answers only, and each copy is logged as v2 with
    `mirror` 1 by the shadow's server, its status and time the candidate's."""
    with sibling_loaded(triton_cluster, model, 300_000) as (sibling, _, _):
        route = ModelRoute(
            model, {1: 100.0, 2: 0.0}, targets={2: sibling}, mirror=50.0, mirror_version=2
        )
        router.apply(RouterState(upstreams, [route]))
        tail = AccessLogTail.from_end(router.access_log_path)
        started = time.perf_counter()
        seen = versions_of(router, model, 60)
        took_s = time.perf_counter() - started
        assert seen == Counter({"1": 60})  # no client ever got the candidate's answer
        lines: list[str] = []
        deadline, quiet_since = time.monotonic() + 20, time.monotonic()
        while time.monotonic() < deadline:  # until the copies stop coming for a second
            more = tail.read_lines()
            lines += more
            quiet_since = time.monotonic() if more else quiet_since
            if len(lines) >= 60 and time.monotonic() - quiet_since > 1.0:
                break
            time.sleep(0.1)
        entries = [e for e in map(parse_line, lines) if e is not None]
        copies = [e for e in entries if e.mirror]
        client_lines = [e for e in entries if not e.mirror]
        assert [e.version for e in client_lines] == [1] * 60, [
            e for e in client_lines if e.version != 1
        ][:2]
        assert 15 <= len(copies) <= 45, len(copies)  # about half, picked per request id
        assert all(e.model == model and e.version == 2 and e.status == 200 for e in copies)
        slowest_copy = max(e.request_time_s for e in copies)
        print(
            f"MEASURED shadow: 60 sequential keep-alive requests took {took_s * 1000:.0f} ms "
            f"with {len(copies)} copies to a candidate whose slowest took "
            f"{slowest_copy * 1000:.0f} ms"
        )
        assert slowest_copy >= 0.25  # the copies did wait for the slow candidate
        errors = router.error_log_path.read_text()
        assert "upstream timed out" not in errors, errors[-600:]
