"""The compose kit for real: build the images (cached), `podman-compose up` the whole stack
(PostgreSQL, Redis, web, worker + router, beat, collector, Prometheus, two CPU Triton
nodes), check from inside a Triton container that PostgreSQL, Redis and the web process do
not answer and that the node's control API asks for the node key, then through the API
register a model, deploy it to the stack's Triton nodes, infer through the router, run a
short canary to promotion, read /metrics (and see Prometheus scrape it); finally tear
everything down and check that nothing is left."""

from __future__ import annotations

import json
import secrets
import shutil
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from integrations.triton.local import free_ports
from tests.install import kit
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.timeout(1800)
FEATURES = {"name": "FEATURES", "datatype": "FP32", "shape": [1, 128], "data": [0.5] * 128}
BODY = {"inputs": [FEATURES]}


class Api:
    """A tiny client for the stack's published ports (urllib: nothing beyond the stdlib)."""

    def __init__(self, port: int, token: str = ""):
        self.base, self.token = f"http://127.0.0.1:{port}", token

    def call(self, method: str, path: str, body=None, *, headers=None, raw: bytes | None = None):
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        url = self.base + path  # always http://127.0.0.1:<port>/...
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Token {self.token}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def json(self, method: str, path: str, body=None, expect=(200, 201, 202)) -> dict:
        status, content = self.call(method, path, body)
        assert status in expect, f"{method} {path}: {status} {content[:500]!r}"
        return json.loads(content)

    def upload(self, path: str, filename: str, archive: bytes) -> dict:
        boundary = uuid.uuid4().hex
        raw = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; '
                f'filename="{filename}"\r\nContent-Type: application/gzip\r\n\r\n'
            ).encode()
            + archive
            + f"\r\n--{boundary}--\r\n".encode()
        )
        content_type = f"multipart/form-data; boundary={boundary}"
        status, content = self.call("POST", path, raw=raw, headers={"Content-Type": content_type})
        assert status == 201, content[:500]
        return json.loads(content)


class Traffic(threading.Thread):
    """Steady inference through the router while a release runs."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.router, self.stop, self.ok, self.failed = Api(port), threading.Event(), 0, 0

    def run(self) -> None:
        while not self.stop.is_set():
            status, _ = self.router.call("POST", "/v2/models/risk_score/infer", BODY)
            if status == 200:
                self.ok += 1
            else:
                self.failed += 1
            time.sleep(0.05)


@pytest.fixture
def stack(tmp_path, capsys):
    """The built images and a running compose project; always torn down."""
    for tool in ("podman", "runc", "debootstrap"):
        if not (shutil.which(tool) or shutil.which(f"/usr/sbin/{tool}")):
            pytest.skip(f"{tool} is not installed (scripts/setup_system.sh installs it)")
    started = time.monotonic()
    images, built = kit.build_images()
    built_s = time.monotonic() - started
    (tmp_path / "metrics_token").write_text(secrets.token_urlsafe(24))
    (tmp_path / "metrics_token").chmod(0o644)
    (tmp_path / "node_key").write_text(secrets.token_urlsafe(24))
    (tmp_path / "node_key").chmod(0o644)
    web, router, prometheus = free_ports(3)
    env = {
        **kit.podman_env(),
        **images,
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "POSTGRES_PASSWORD": secrets.token_urlsafe(16),
        "REDIS_PASSWORD": secrets.token_urlsafe(16),
        "COMPOSE_PROFILES": "cpu",
        "SWITCHYARD_BIND": "127.0.0.1",
        "SWITCHYARD_WEB_PORT": str(web),
        "SWITCHYARD_ROUTER_PORT": str(router),
        "SWITCHYARD_PROMETHEUS_PORT": str(prometheus),
        "SWITCHYARD_ROUTER_CLUSTERS": "compose",
        "SWITCHYARD_METRICS_TOKEN_PATH": str(tmp_path / "metrics_token"),
        "SWITCHYARD_NODE_KEY_PATH": str(tmp_path / "node_key"),
    }
    ports = {"web": web, "router": router, "prometheus": prometheus}
    kit.remove_stale_stacks()
    project = f"{kit.PROJECT_PREFIX}{uuid.uuid4().hex[:8]}"
    stack = kit.Stack(project=project, env=env, ports=ports, secrets_dir=tmp_path)
    try:
        started = time.monotonic()
        stack.compose("up", "-d", timeout=900)
        kit.wait_until(
            lambda: Api(web).call("GET", "/healthz")[0] == 200, timeout_s=600, what="healthz"
        )
        up_s = time.monotonic() - started
        with capsys.disabled():
            print(f"\ncompose kit: images {built_s:.0f} s (built: {', '.join(built) or 'none'}; "
                  f"the rest cached by content hash), stack up {up_s:.0f} s")  # fmt: skip
        yield stack
    finally:
        services = ["web", "worker", "beat", "collector", "triton-1", "triton-2", "prometheus"]
        services.append("front")
        print(f"container logs: {stack.save_logs(services)}")
        stack.down()
        left = stack.leftovers()
        assert left == {"containers": [], "pods": [], "networks": [], "volumes": []}, left


def sign_in(stack: kit.Stack) -> Api:
    password = secrets.token_urlsafe(16)
    stack.exec(
        "web", "python", "manage.py", "createsuperuser", "--noinput", "--username", "kit",
        "--email", "kit@example.com", env={"DJANGO_SUPERUSER_PASSWORD": password},
    )  # fmt: skip
    api = Api(stack.ports["web"])
    token = api.json("POST", "/api/v1/auth/token/", {"username": "kit", "password": password})
    return Api(stack.ports["web"], token["token"])


def register_fleet(api: Api, router_port: int) -> None:
    api.json("POST", "/api/v1/teams/", {"name": "fraud"})
    api.json("POST", "/api/v1/models/", {"name": "risk_score", "team": "fraud"})
    for version in (1, 2):
        archive = tar_gz(example_entries("risk_score", version))
        api.upload("/api/v1/models/risk_score/versions/", f"v{version}.tar.gz", archive)
    # `url` is where clients send inference: the host port `front` publishes the router on.
    client_url = f"http://127.0.0.1:{router_port}"
    router = {"driver": "nginx", "listen": "127.0.0.1:18080", "url": client_url}
    cluster = {
        "name": "compose",
        "environment": "production",
        "router": router,
        "api_key_ref": "file:/run/secrets/node_key",  # the compose secret node_key
    }
    api.json("POST", "/api/v1/clusters/", cluster)
    for node in ("triton-1", "triton-2"):
        api.json(
            "POST",
            "/api/v1/clusters/compose/nodes/",
            {
                "name": node,
                "http_url": f"http://{node}.switchyard.internal:8000",
                "grpc_url": f"{node}.switchyard.internal:8001",
                "metrics_url": f"http://{node}.switchyard.internal:8002/metrics",
            },
        )


# Run inside a container: "connected", or why not (the name of the error).
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("connected")
except OSError as exc:
    print(type(exc).__name__, exc)
"""


def addresses(stack: kit.Stack, service: str) -> dict[str, str]:
    """The container's address on each of its networks ("control", "data-1", "data-2")."""
    found = kit.run(
        ["podman", "inspect", stack.container(service), "--format",
         "{{json .NetworkSettings.Networks}}"]
    ).stdout  # fmt: skip
    prefix = f"{stack.project}_"
    return {k.removeprefix(prefix): v["IPAddress"] for k, v in json.loads(found).items()}


def connect_from(stack: kit.Stack, service: str, host: str, port: int) -> str:
    return stack.exec(service, "python3", "-c", CONNECT, host, str(port)).strip()


def check_nodes_are_fenced_off(stack: kit.Stack) -> None:
    """From a Triton container: PostgreSQL, Redis, the web process and the other node do not
    answer (no route off its own network; the web process does not listen on it), the
    router does; the control plane reaches both nodes."""
    assert set(addresses(stack, "triton-1")) == {"data-1"}
    assert set(addresses(stack, "triton-2")) == {"data-2"}
    web = addresses(stack, "web")
    for service, port in (("postgres", 5432), ("redis", 6379), ("web", 8000), ("triton-2", 8000)):
        for address in addresses(stack, service).values():
            answer = connect_from(stack, "triton-1", address, port)
            assert answer != "connected", (service, address, answer)
    for address in addresses(stack, "triton-1").values():  # and the other way round
        assert connect_from(stack, "triton-2", address, 8001) != "connected", address
    assert connect_from(stack, "worker", web["control"], 8000) == "connected"
    assert connect_from(stack, "worker", web["data-1"], 8000) != "connected"
    assert connect_from(stack, "worker", web["data-2"], 8000) != "connected"
    worker = addresses(stack, "worker")
    assert connect_from(stack, "triton-1", worker["data-1"], 8080) == "connected"  # the router
    for node in ("triton-1", "triton-2"):
        (address,) = addresses(stack, node).values()
        assert connect_from(stack, "worker", address, 8000) == "connected", node


def check_control_api_asks_for_the_node_key(stack: kit.Stack) -> None:
    """A node's repository API answers 403 without the key and 200 with it."""
    url = "http://triton-2.switchyard.internal:8000/v2/repository/index"
    curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", url]
    assert stack.exec("worker", *curl) == "403"
    key = (stack.secrets_dir / "node_key").read_text()
    assert stack.exec("worker", *curl, "-H", f"switchyard-node-key: {key}") == "200"
    environment = stack.exec("triton-1", "env")
    assert not {"DJANGO_SECRET_KEY", "REDIS_URL", "DATABASE_URL"} & {
        line.split("=", 1)[0] for line in environment.splitlines()
    }


def deploy(api: Api, version: int) -> dict:
    body = {"cluster": "compose", "model": "risk_score", "version": version}
    created = api.json("POST", "/api/v1/deployments/", body)

    def finished():
        found = api.json("GET", f"/api/v1/deployments/{created['id']}/")
        return found if found["status"] in ("succeeded", "failed") else None

    return kit.wait_until(finished, timeout_s=300, what="deployment")


def infer_through_router(port: int) -> dict:
    def answered():
        status, content = Api(port).call("POST", "/v2/models/risk_score/infer", BODY)
        return json.loads(content) if status == 200 else None

    return kit.wait_until(answered, timeout_s=120, what="inference through the router")


def canary_to_promotion(api: Api, router_port: int) -> dict:
    body = {
        "cluster": "compose",
        "model": "risk_score",
        "candidate_version": 2,
        "steps": [50, 100],
        "step_interval_s": 4,
        "analysis": {"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5},
    }
    release = api.json("POST", "/api/v1/releases/", body)
    traffic = Traffic(router_port)
    traffic.start()
    try:

        def finished():
            found = api.json("GET", f"/api/v1/releases/{release['id']}/")
            return found if found["finished"] else None

        done = kit.wait_until(finished, timeout_s=300, what="release end", every_s=2)
    finally:
        traffic.stop.set()
        traffic.join(10)
    assert traffic.ok > 20 and traffic.failed <= traffic.ok * 0.02, (traffic.ok, traffic.failed)
    return done


def test_compose_stack_registers_deploys_infers_promotes_a_canary_and_exports_metrics(stack):
    check_nodes_are_fenced_off(stack)
    check_control_api_asks_for_the_node_key(stack)
    api = sign_in(stack)
    register_fleet(api, stack.ports["router"])
    deployment = deploy(api, 1)
    assert deployment["status"] == "succeeded", deployment
    answer = infer_through_router(stack.ports["router"])
    assert answer["model_name"] == "risk_score" and answer["outputs"][0]["name"] == "SCORE"

    release = canary_to_promotion(api, stack.ports["router"])
    assert release["state"] == "succeeded", release

    token = (stack.secrets_dir / "metrics_token").read_text()
    web = Api(stack.ports["web"])
    refused, _ = web.call("GET", "/metrics")  # the host reaches web through the bridge
    assert refused == 401
    status, content = web.call("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
    metrics = content.decode()
    assert status == 200
    finished = 'cluster="compose",model="risk_score",phase="SUCCEEDED"'
    assert f"switchyard_releases_finished_total{{{finished}}} 1.0" in metrics
    assert 'switchyard_node_up{cluster="compose",node="triton-2"} 1.0' in metrics
    pushed = 'cluster="compose",kind="deploy",status="succeeded"'
    assert f"switchyard_deployments_total{{{pushed}}}" in metrics

    prometheus = Api(stack.ports["prometheus"])

    def scraped():
        _, found = prometheus.call("GET", "/api/v1/query?query=up")
        ups = {r["metric"]["job"]: r["value"][1] for r in json.loads(found)["data"]["result"]}
        return ups if ups.get("switchyard") == "1" and ups.get("triton") == "1" else None

    kit.wait_until(scraped, timeout_s=60, what="Prometheus scraping web and Triton", every_s=3)
