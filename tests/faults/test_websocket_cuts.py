"""Fifty live-page websockets cut mid-stream: the web process's pool is whole again and the
web answers as before.

A real daphne with a small pool serves the cluster live consumer; the test streams telemetry
batches to the cluster's group through the Redis channel layer (as the collector does), lets
every client read some of the stream, then cuts every TCP connection abruptly (RST, no close
frame). The pool's numbers are read from the web's own /metrics export."""

import contextlib
import http.client
import json
import socket
import struct
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families
from websockets.sync.client import connect

from accounts.services import api_token_create, ws_ticket_create
from controlplane import db_pool
from deployments.models import TritonCluster
from telemetry import events
from tests.conftest import daphne_process, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

POOL = 4
SOCKETS = 50
POINTS_BEFORE_CUT = 5


def _get(port: int, path: str, headers: dict | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def _pool_of(port: int, pid: int) -> dict[str, float]:
    """The daphne process's pool samples from /metrics, by metric name."""
    status, text = _get(port, "/metrics")
    assert status == 200, text
    process = f"{socket.gethostname()}:{pid}"
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        if family.name.startswith("switchyard_db_pool_")
        for s in family.samples
        if s.labels.get("process") == process
    }


def _cut(ws) -> None:
    """Close the TCP connection at once with a reset: no close frame, no FIN handshake."""
    sock = ws.socket
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Stream:
    """Telemetry batches to one group through the channel layer, every few milliseconds."""

    def __init__(self, group: str) -> None:
        self.group, self.stop, self.sent = group, threading.Event(), 0
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        send = async_to_sync(get_channel_layer().group_send)
        while not self.stop.is_set():
            point = {"type": "node", "ts": time.time(), "seq": self.sent, "pad": "x" * 200}
            send(self.group, events.batch([point, dict(point, seq=-1)]))
            self.sent += 1
            self.stop.wait(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def test_fifty_live_websockets_cut_mid_stream_give_every_connection_back(make_user, tmp_path):
    user = make_user("olga", role="release-managers")
    _, secret = api_token_create(user=user, name="after-the-cut")
    cluster = TritonCluster.objects.create(name=f"cut-{uuid.uuid4().hex[:8]}", environment="prod")
    tickets = [ws_ticket_create(user=user, token=None)[0] for _ in range(SOCKETS + 1)]
    env = {"SWITCHYARD_DATABASE_POOL_SIZE": str(POOL)}
    with daphne_process(tmp_path / "daphne.log", **env) as (proc, port):
        origin = f"http://127.0.0.1:{port}"
        url = f"ws://127.0.0.1:{port}/ws/clusters/{cluster.name}/?ticket="

        opened = contextlib.ExitStack()

        def open_and_read(ticket: str):
            ws = opened.enter_context(connect(url + ticket, origin=origin, open_timeout=60))
            assert json.loads(ws.recv(timeout=60))["type"] == "hello"
            for _ in range(POINTS_BEFORE_CUT):
                assert json.loads(ws.recv(timeout=60))["type"] == "node"
            return ws

        try:
            with (
                opened,
                _Stream(events.cluster_group(cluster.name)),
                ThreadPoolExecutor(10) as pool,
            ):
                sockets = list(pool.map(open_and_read, tickets[:SOCKETS]))
                for ws in sockets:  # all cut while the stream still runs
                    _cut(ws)
                wait_for(
                    lambda: _pool_of(port, proc.pid).get("switchyard_db_pool_checked_out") == 0,
                    timeout_s=60,
                    what=f"the pool to be whole again: {_pool_of(port, proc.pid)}",
                    proc=proc,
                    log=tmp_path / "daphne.log",
                )
            pool_now = _pool_of(port, proc.pid)
            assert pool_now["switchyard_db_pool_max_connections"] == POOL
            assert pool_now["switchyard_db_pool_waiting"] == 0
            # The web answers as before: pages, the API, a new live socket.
            token = {"Authorization": f"Token {secret}"}
            for _ in range(POOL * 3):
                assert _get(port, "/api/v1/clusters/", token)[0] == 200
            assert _get(port, "/login/")[0] == 200
            with connect(url + tickets[-1], origin=origin) as ws:
                assert json.loads(ws.recv(timeout=30))["type"] == "hello"
        finally:
            client = redis.Redis.from_url(settings.REDIS_URL)
            client.hdel(db_pool.stats_key(), f"{socket.gethostname()}:{proc.pid}")
            client.close()


def _gives_up(port: int, path: str, headers: dict) -> None:
    """A client that sends a request and goes away after a second without an answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", path, headers=headers)
        conn.getresponse().read()
    except TimeoutError:
        pass
    finally:
        conn.close()


def test_requests_whose_clients_left_during_a_database_stall_give_every_connection_back(
    make_user, tmp_path
):
    from django.db import connection, transaction

    from accounts.models import ApiToken

    user = make_user("olga", role="release-managers")
    _, secret = api_token_create(user=user, name="stalled")
    token = {"Authorization": f"Token {secret}"}
    log = tmp_path / "daphne.log"
    env = {"SWITCHYARD_DATABASE_POOL_SIZE": str(POOL), "SWITCHYARD_DATABASE_POOL_TIMEOUT_S": "30"}
    with daphne_process(log, **env) as (proc, port):
        try:
            with transaction.atomic():  # every request's token check waits on this lock
                with connection.cursor() as cursor:
                    cursor.execute(f"LOCK TABLE {ApiToken._meta.db_table} IN ACCESS EXCLUSIVE MODE")
                with ThreadPoolExecutor(POOL * 2) as pool:
                    list(
                        pool.map(
                            lambda _: _gives_up(port, "/api/v1/clusters/", token), range(POOL * 2)
                        )
                    )
                # daphne ends what its clients left once they are gone long enough
                wait_for(
                    lambda: "took too long to shut down" in log.read_text(),
                    timeout_s=60,
                    what="daphne to end the abandoned requests",
                )
            wait_for(
                lambda: _pool_of(port, proc.pid).get("switchyard_db_pool_checked_out") == 0,
                timeout_s=60,
                what="the pool to be whole again",
                proc=proc,
                log=log,
            )
            for _ in range(POOL * 3):
                assert _get(port, "/api/v1/clusters/", token)[0] == 200
        finally:
            client = redis.Redis.from_url(settings.REDIS_URL)
            client.hdel(db_pool.stats_key(), f"{socket.gethostname()}:{proc.pid}")
            client.close()
