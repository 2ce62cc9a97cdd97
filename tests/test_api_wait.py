"""?wait= long-polling on the real stack: daphne serving the ASGI app, a real Celery worker,
a real Triton node. More clients wait on one deployment than the server holds threads; none
of them holds a thread while waiting, and each is answered as soon as the worker finishes."""

import http.client
import json
import os
import threading
import uuid

import pytest
import redis
from channels.layers import get_channel_layer
from django.conf import settings as django_settings

from accounts.waits import group_name
from deployments.models import Deployment
from deployments.services import cluster_create, node_create
from integrations.triton.local import start_cluster
from models_registry.services import model_create, team_create
from tests.cli.test_cli_flow import _start_daphne
from tests.conftest import (
    drop_queues,
    session_node_key,
    start_celery_worker,
    stop_process,
    wait_for,
)
from tests.deployments.test_push import _register

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

WAITERS = 16


def _call(url: str, method: str, path: str, body=None, token=None, timeout_s: float = 90):
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout_s)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    try:
        conn.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def _requests_read(port: int) -> int:
    """Established connections to the server's `port` whose request bytes the server has
    read (nothing left in its receive queue): /proc/net/tcp as the kernel sees them."""
    read = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                read += int(queues.split(":")[1], 16) == 0
    return read


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _parked(group: str, *, clear: bool = False) -> int:
    """How many channels (waiting requests) the group holds in Redis now; `clear` forgets
    members an earlier run's killed server left (ids restart with each test database)."""
    key = get_channel_layer()._group_key(group)
    host = django_settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]
    client = redis.Redis.from_url(host["address"])
    try:
        if clear:
            client.delete(key)
        return client.zcard(key)
    finally:
        client.close()


@pytest.fixture
def node(tmp_path):
    cluster = start_cluster(1, tmp_path / "triton", node_key=session_node_key())
    try:
        yield cluster.nodes[0]
    finally:
        cluster.stop()


@pytest.fixture
def deployment_world(node, settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    _register(model, ada, 1)
    cluster = cluster_create(
        actor=rita, name="wait-stage", environment="staging", router={"driver": "none"}
    )
    node_create(
        cluster=cluster, actor=rita, name=node.name, http_url=node.http_url, grpc_url=node.grpc_url
    )
    queue = f"test-{uuid.uuid4().hex[:10]}"
    env = {
        "SWITCHYARD_STORAGE_ROOT": str(settings.SWITCHYARD_STORAGE_ROOT),
        "SWITCHYARD_DEPLOY_DRAIN_S": "0.2",
        "SWITCHYARD_CELERY_QUEUE": queue,
    }
    proc, url = _start_daphne(tmp_path / "daphne.log", env)
    try:
        status, body = _call(
            url, "POST", "/api/v1/auth/token/", {"username": "rita", "password": "pw-rita"}
        )
        assert status == 200, body
        yield {"url": url, "token": body["token"], "proc": proc, "queue": queue, "tmp": tmp_path}
    finally:
        stop_process(proc)
        drop_queues(queue)


def test_more_waiters_than_threads_park_for_free_and_wake_when_the_deployment_ends(
    deployment_world,
):
    world = deployment_world
    url, token, pid = world["url"], world["token"], world["proc"].pid
    body = {"cluster": "wait-stage", "model": "risk_score", "version": 1}
    status, created = _call(url, "POST", "/api/v1/deployments/", body, token)
    assert status == 202, created
    assert (created["state"], created["finished"], created["outcome"]) == ("pending", False, None)
    path = f"/api/v1/deployments/{created['id']}/?wait=60"
    group = group_name("deployment", created["id"])
    assert _parked(group, clear=True) == 0
    idle = _threads(pid)
    answers: list = [None] * WAITERS

    def wait(i: int) -> None:
        answers[i] = _call(url, "GET", path, token=token)

    port = int(url.rsplit(":", 1)[1])
    clients = [threading.Thread(target=wait, args=(i,), daemon=True) for i in range(WAITERS)]
    for client in clients:
        client.start()
    # The server listens to the group once, for all its waiters.
    wait_for(lambda: _parked(group) == 1, timeout_s=60, what="the server listening")
    # Every waiter's request reached the server: it read them all.
    wait_for(
        lambda: _requests_read(port) >= WAITERS,
        timeout_s=60,
        what=f"the server reading {WAITERS} requests",
    )
    # Each parked request gave its thread back: the server has far fewer threads than waiters.
    wait_for(lambda: _threads(pid) - idle < WAITERS // 2, timeout_s=30, what="threads released")
    assert all(answer is None for answer in answers)  # nobody answered before the work ran

    worker = start_celery_worker(world["tmp"] / "worker.log", world["queue"])
    try:
        for client in clients:
            client.join(timeout=120)
    finally:
        worker.stop()
    deployment = Deployment.objects.get(pk=created["id"])
    assert deployment.status == "succeeded", deployment.error
    # Every waiter parked before the work ran, and each was answered the finished deployment.
    for status, answer in answers:
        assert status == 200 and answer["state"] == "succeeded", answer
        assert (answer["finished"], answer["outcome"]) == (True, "succeeded")
    wait_for(lambda: _parked(group) == 0, timeout_s=10, what="the group left")


def test_wait_is_bounded_and_checked(deployment_world):
    world = deployment_world
    url, token = world["url"], world["token"]
    body = {"cluster": "wait-stage", "model": "risk_score", "version": 1}
    status, created = _call(url, "POST", "/api/v1/deployments/", body, token)
    assert status == 202
    path = f"/api/v1/deployments/{created['id']}/"
    for bad in ("soon", "-1", "nan", "inf"):
        status, answer = _call(url, "GET", f"{path}?wait={bad}", token=token)
        assert status == 400 and answer["errors"][0]["field"] == "wait", answer
    # No worker runs: the request parks (the server listens to the deployment's group while
    # it waits), then the wait runs out and answers the unfinished deployment as it is.
    group = group_name("deployment", created["id"])
    assert _parked(group, clear=True) == 0
    answered: list = []
    waiter = threading.Thread(
        target=lambda: answered.append(_call(url, "GET", f"{path}?wait=5", token=token))
    )
    waiter.start()
    try:
        wait_for(lambda: _parked(group) == 1, timeout_s=30, what="the request parked")
    finally:
        waiter.join(timeout=90)
    [(status, answer)] = answered
    assert status == 200 and (answer["state"], answer["finished"]) == ("pending", False)
    # An unknown one is a 404 at once; a wrong token a 401, both without waiting.
    assert _call(url, "GET", "/api/v1/deployments/999999/?wait=30", token=token)[0] == 404
    assert _call(url, "GET", f"{path}?wait=30", token="nope")[0] == 401
