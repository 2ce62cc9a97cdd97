"""Bounded database connections: a web process with a pool of 2 serves a burst of concurrent
API requests, every one answered, while PostgreSQL sees at most 2 connections from it (the
others wait for a free connection instead of opening one each); a burst of sign-ins with
real password hashes all get in."""

import http.client
import re
import threading
import urllib.parse
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


SIGNINS = 8


def _sign_in(host: str, port: int, username: str, password: str) -> int:
    """The console's login form, as a browser posts it: the status of the POST."""
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request("GET", "/login/")
        page = conn.getresponse()
        body = page.read().decode()
        cookie = page.getheader("Set-Cookie", "").split(";")[0]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body).group(1)
        form = urllib.parse.urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": token}
        )
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
        conn.request("POST", "/login/", body=form, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_a_burst_of_sign_ins_never_holds_the_pool_while_passwords_hash(make_user, tmp_path):
    """Real PBKDF2 hashes (about a second of CPU each here), a pool of one connection that
    gives up after 1 s: every sign-in of the burst gets in (the hash runs with the connection
    given back), none answers 503 for want of a connection."""
    from django.contrib.auth.hashers import make_password

    users = [make_user(f"burst{i}") for i in range(SIGNINS)]
    slow = make_password("pw-burst", hasher="pbkdf2_sha256")
    type(users[0]).objects.filter(pk__in=[u.pk for u in users]).update(password=slow)
    server = serve_daphne(
        tmp_path / "daphne.log",
        SWITCHYARD_DATABASE_POOL_SIZE="1",
        SWITCHYARD_DATABASE_POOL_TIMEOUT_S="1",
    )
    host, port = next(server).split(":")
    try:
        with ThreadPoolExecutor(SIGNINS) as pool:
            statuses = list(
                pool.map(lambda u: _sign_in(host, int(port), u.username, "pw-burst"), users)
            )
    finally:
        server.close()
    assert statuses == [302] * SIGNINS, statuses  # 302: signed in, sent on to the console
