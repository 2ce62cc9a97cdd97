"""Bounded database connections: a web process with a pool of 2 serves a burst of concurrent
API requests, every one answered, while PostgreSQL sees at most 2 connections from it (the
others wait for a free connection instead of opening one each)."""

import http.client
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from accounts.services import api_token_create
from tests.conftest import serve_daphne

pytestmark = pytest.mark.django_db(transaction=True)

POOL = 2
CLIENTS = 16
REQUESTS_EACH = 5


def _connections_named(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name])
        return cursor.fetchone()[0]


def test_a_web_process_holds_at_most_its_pool_under_a_burst(make_user, tmp_path):
    user = make_user("rita", role="release-managers")
    _, secret = api_token_create(user=user, name="burst")
    name = f"pool-test-{uuid.uuid4().hex[:8]}"
    server = serve_daphne(
        tmp_path / "daphne.log",
        SWITCHYARD_DATABASE_POOL_SIZE=str(POOL),
        SWITCHYARD_DATABASE_APPLICATION_NAME=name,
    )
    address = next(server)
    host, port = address.split(":")
    peak, stop = [0], threading.Event()

    def watch():
        try:
            while not stop.is_set():
                peak[0] = max(peak[0], _connections_named(name))
                stop.wait(0.02)
        finally:
            connection.close()  # this thread's own connection

    def client(_):
        statuses = []
        for _ in range(REQUESTS_EACH):
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            try:
                conn.request("GET", "/api/v1/models/", headers={"Authorization": f"Token {secret}"})
                response = conn.getresponse()
                response.read()
                statuses.append(response.status)
            finally:
                conn.close()
        return statuses

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            statuses = [s for batch in pool.map(client, range(CLIENTS)) for s in batch]
    finally:
        stop.set()
        watcher.join()
        server.close()  # stops daphne
    assert statuses == [200] * (CLIENTS * REQUESTS_EACH)
    assert 1 <= peak[0] <= POOL, peak[0]
    assert _connections_named(name) == 0  # the stopped process left none behind
