"""A live ASGI server for the API fuzzer: daphne under the loopback guard, on the test
database, with a Celery queue of its own that no worker reads."""

import http.client
import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, child_environment, stop_process, wait_for


@dataclass
class FuzzServer:
    base_url: str
    guard_log: Path
    queue: str


def _answers(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", "/login/")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _drop_queue(queue: str) -> None:
    """Drop the queue and what the run queued: no worker reads it, nothing may run later."""
    import redis
    from django.conf import settings

    from controlplane.queues import all_queues

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        for lane in all_queues(queue):  # every lane's queue of the run's base queue
            client.delete(lane, f"_kombu.binding.{lane}", f"_kombu.binding_permanent.{lane}")
    finally:
        client.close()


@pytest.fixture
def fuzz_server(transactional_db, tmp_path):
    """daphne serving the real app; tasks queue on a fresh queue that nothing consumes."""
    from integrations.triton.local import free_ports

    (port,) = free_ports(1)
    queue = f"fuzz-unconsumed-{uuid.uuid4().hex[:10]}"
    guard_log = tmp_path / "guard.log"
    guard_log.write_text("")
    log = tmp_path / "daphne.log"
    args = ["-b", "127.0.0.1", "-p", str(port), "controlplane.asgi:application"]
    env = child_environment(SWITCHYARD_CELERY_QUEUE=queue, SWITCHYARD_FUZZ_GUARD_LOG=str(guard_log))
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.schema.loopback_guard", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: _answers(port), timeout_s=60, what="daphne", proc=proc, log=log)
        yield FuzzServer(f"http://127.0.0.1:{port}", guard_log, queue)
    finally:
        stop_process(proc)
        _drop_queue(queue)


def api_token(base_url: str, username: str, password: str) -> str:
    """A token through POST /api/v1/auth/token/, as a script would get one."""
    conn = http.client.HTTPConnection(base_url.removeprefix("http://"), timeout=30)
    try:
        body = json.dumps({"username": username, "password": password})
        conn.request("POST", "/api/v1/auth/token/", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read())
    finally:
        conn.close()
    assert response.status in (200, 201), payload
    return payload["token"]
