"""A running web process rides through a restart of PostgreSQL (issue #18); the restart
of Redis under a live page is tests/faults/test_restarts_redis.py (a browser test, in a file
of its own: `make test` gives each file to one pytest-xdist worker, and browser tests run
after the rest there, tests/conftest.py).

Each test starts servers of its own on free ports (tests/faults/own_services.py; the
machine's shared ones are never touched) and a real daphne pointed at them:

* PostgreSQL is restarted (`pg_ctl stop -m fast`, then `-m immediate` under a write): the
  pooled connections it dropped are replaced unnoticed; a write cut off mid-transaction and
  every request during the outage answer 503 with Retry-After; afterwards the same process
  serves at once, nothing of the cut-off write is stored, and its retry with the same
  Idempotency-Key runs.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from tests.conftest import serve_daphne, wait_for
from tests.faults.own_services import OwnPostgres, OwnRedis, migrate_and_seed

APP_NAME = "restart-test"
# No Celery worker runs here: the home page's health card waits this long for none to answer.
QUICK_HEALTH = {"SWITCHYARD_HEALTH_WORKER_PING_TIMEOUT_S": "0.2"}


@pytest.fixture
def own_redis(tmp_path):
    server = OwnRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def _no_500_and_no_traceback(log) -> None:
    text = log.read_text(errors="replace")
    assert not re.search(r'" 500 \d+', text), text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def _outage_answer(response, kind: str) -> None:
    """503 with Retry-After, in the API's error shape (json) or as the small page (html)."""
    assert response.status == 503, (response.url, response.status)
    assert int(response.headers["retry-after"]) > 0
    if kind == "json":
        assert "unreachable" in response.json()["errors"][0]["message"]
    else:
        assert "briefly unavailable" in response.text()


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture
def pg_stack(own_redis, tmp_path):
    """A PostgreSQL of our own, migrated, with a release manager and her token, and daphne
    on it with a pool of 2 connections (the web kind pools its connections)."""
    pg = OwnPostgres()
    try:
        pg.init("switchyard")
        url = pg.url("switchyard")
        env = {"DATABASE_URL": url, "SWITCHYARD_TEST_REDIS_URL": own_redis.url}
        token = migrate_and_seed(env)
        log = tmp_path / "daphne.log"
        server = serve_daphne(
            log,
            **env,
            SWITCHYARD_DATABASE_POOL_SIZE="2",
            SWITCHYARD_DATABASE_POOL_TIMEOUT_S="1.5",
            SWITCHYARD_DATABASE_APPLICATION_NAME=APP_NAME,
            **QUICK_HEALTH,
        )
        base = f"http://{next(server)}"
        try:
            yield {"pg": pg, "url": url, "base": base, "token": token, "log": log}
        finally:
            server.close()
    finally:
        pg.remove()


class _Answer:
    """httpx's response with the accessors `_outage_answer` reads (Playwright's names)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response, self.status, self.url = response, response.status_code, response.url
        self.headers = response.headers

    def json(self):
        return self.response.json()

    def text(self) -> str:
        return self.response.text


def _signed_in(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    client.get("/login/")
    form = {"username": "olga", "password": "pw-olga"}
    form["csrfmiddlewaretoken"] = client.cookies["csrftoken"]
    assert client.post("/login/", data=form).status_code == 302
    return client


def _waiting_on_a_lock(url: str, statement: str = "") -> bool:
    """True when a statement of the web process (starting with `statement`) waits on a lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        query += " AND wait_event_type = 'Lock' AND query LIKE %s"
        return conn.execute(query, [APP_NAME, f"{statement}%"]).fetchone()[0] > 0


def test_a_postgresql_restart_under_the_api_and_the_console(pg_stack):
    pg, url, base, log = pg_stack["pg"], pg_stack["url"], pg_stack["base"], pg_stack["log"]
    api = httpx.Client(
        base_url=base, timeout=30, headers={"Authorization": f"Token {pg_stack['token']}"}
    )
    console = _signed_in(base)
    clusters = "/api/v1/clusters/"
    with ThreadPoolExecutor(4) as pool:  # both pooled connections in use, then idle
        assert [r.status_code for r in pool.map(lambda _: api.get(clusters), range(8))] == [200] * 8

    # 1. A quick restart between requests: the connections it dropped are not handed out.
    pg.stop()
    pg.start()
    assert [api.get(clusters).status_code for _ in range(4)] == [200] * 4

    # 2. A write cut off mid-transaction: its cluster row is inserted, its audit row waits
    # on a lock this test holds when PostgreSQL stops. It stops at once ("immediate", as on a
    # crash): in a fast stop the lock holder's session can end first and let the write
    # commit before its own session is ended, a race no client can rely on either way.
    key = f"restart-{uuid.uuid4().hex[:8]}"
    body = {"name": "cut-off", "environment": "staging"}
    holder, writer, answers = _keyed_write_behind_the_audit_lock(url, api, body, key)
    try:
        wait_for(lambda: _waiting_on_a_lock(url), timeout_s=10, what="the write waiting")
        pg.stop("immediate")
        stopped = time.monotonic()
    finally:
        writer.join(timeout=30)
        holder.close()
    _outage_answer(_Answer(answers[0]), "json")

    # 3. While it is down: 503 with Retry-After everywhere, the console's page included.
    _outage_answer(_Answer(api.get(clusters)), "json")
    _outage_answer(_Answer(api.post(clusters, json={"name": "during"})), "json")
    _outage_answer(_Answer(console.get("/")), "html")
    health = api.get("/healthz")
    assert health.status_code == 503 and health.json()["status"] == "unhealthy"
    assert set(health.json()) == {"status", "checked_at"}  # anonymous: no detail
    # Down for 8 s at least: psycopg_pool's own backoff (1, 2, 4, 8 s between attempts) would
    # then make its next attempt 15 s after the stop, seconds after PostgreSQL is back.
    time.sleep(max(0.0, stopped + 8 - time.monotonic()))

    # 4. Back: the same web process serves at once, and nothing of the cut-off write is left.
    # "At once": the first request after PostgreSQL answers again is served, not refused
    # while the pool waits out its backoff.
    pg.start()
    wait_for(lambda: _answers(url), timeout_s=60, what="PostgreSQL answering again")
    first = api.get(clusters)
    assert first.status_code == 200, (first.status_code, first.text[:300])
    assert console.get("/").status_code == 200
    with psycopg.connect(url, autocommit=True) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM deployments_tritoncluster")}
        created = conn.execute(
            "SELECT count(*) FROM audit_auditevent WHERE action = 'cluster.created'"
        ).fetchone()[0]
    assert (names, created) == (set(), 0), log.read_text(errors="replace")[-3000:]
    retried = api.post(clusters, json=body, headers={"Idempotency-Key": key})
    assert retried.status_code == 201, retried.text  # not 409 "still running" for a day
    assert "idempotent-replayed" not in retried.headers
    assert [c["name"] for c in api.get(clusters).json()] == ["cut-off"]

    # 5. Cut off after its work, while its answer is being stored: the work and the answer
    # are one transaction, so neither is left and the retry runs (not 400 "exists").
    _cut_off_while_storing_the_answer(pg, url, api)
    api.close()
    console.close()
    _no_500_and_no_traceback(log)


def _answers(url: str) -> bool:
    """PostgreSQL accepts a connection and answers a query."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def _keyed_write_behind_the_audit_lock(url: str, api: httpx.Client, body: dict, key: str):
    """A session of this test locking the audit table, then a keyed cluster POST in a thread
    (its audit row will wait on that lock): (the lock's connection, the thread, its answers)."""
    answers: list[httpx.Response] = []
    holder = psycopg.connect(url)
    holder.execute("LOCK TABLE audit_auditevent IN ACCESS EXCLUSIVE MODE")
    writer = threading.Thread(
        target=lambda: answers.append(
            api.post("/api/v1/clusters/", json=body, headers={"Idempotency-Key": key})
        )
    )
    writer.start()
    return holder, writer, answers


def _cut_off_while_storing_the_answer(pg, url: str, api: httpx.Client) -> None:
    """The write's audit row waits on one lock, then (the key row locked meanwhile by a
    second session) its stored answer waits on another, when PostgreSQL stops at once."""
    clusters, key = "/api/v1/clusters/", f"store-{uuid.uuid4().hex[:8]}"
    body = {"name": "cut-at-answer", "environment": "staging"}
    keyed = psycopg.connect(url)
    audit, writer, answers = _keyed_write_behind_the_audit_lock(url, api, body, key)
    try:
        wait_for(lambda: _waiting_on_a_lock(url), timeout_s=10, what="the work waiting")
        found = keyed.execute(
            "SELECT id FROM accounts_idempotencykey WHERE key = %s FOR UPDATE", [key]
        ).fetchone()
        assert found is not None  # claimed (committed) before the work began
        audit.commit()  # the work goes on, up to storing its answer on the locked key row
        storing = 'UPDATE "accounts_idempotencykey"'
        wait_for(lambda: _waiting_on_a_lock(url, storing), timeout_s=10, what="the answer waiting")
        pg.stop("immediate")
        stopped = time.monotonic()
    finally:
        writer.join(timeout=30)
        audit.close()
        keyed.close()
    _outage_answer(_Answer(answers[0]), "json")
    time.sleep(max(0.0, stopped + 8 - time.monotonic()))  # past the pool's backoff, as above
    pg.start()
    wait_for(lambda: api.get(clusters).status_code == 200, timeout_s=15, what="served again")
    with psycopg.connect(url, autocommit=True) as conn:
        stored = conn.execute(
            "SELECT count(*) FROM deployments_tritoncluster WHERE name = %s", [body["name"]]
        ).fetchone()[0]
    assert stored == 0  # the work went with its answer
    retried = api.post(clusters, json=body, headers={"Idempotency-Key": key})
    assert retried.status_code == 201, retried.text
    replayed = api.post(clusters, json=body, headers={"Idempotency-Key": key})
    assert replayed.status_code == 201 and replayed.headers["idempotent-replayed"] == "true"
