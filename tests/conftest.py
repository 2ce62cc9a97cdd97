"""Fixtures that start real parts: Triton nodes, a Celery worker, a daphne server.

Every process a fixture starts is stopped by it, also when the test fails.
"""

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# Playwright's sync API keeps an event loop running in the test thread, so Django would take
# the ORM calls made there for calls from async code and refuse them.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
# The key the suite's Triton nodes ask for on model control, new per test session; every
# process the tests start inherits it (SWITCHYARD_TRITON_DEFAULT_KEY_REF in the test
# settings names this variable). Never printed.
NODE_KEY_ENV = "SWITCHYARD_NODE_KEY_TEST"
os.environ.setdefault(NODE_KEY_ENV, secrets.token_urlsafe(32))


def database_url() -> str:
    """The URL of the database the tests use now (pytest-django's test database)."""
    db = settings.DATABASES["default"]
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{db['NAME']}"


def child_environment(**extra: str) -> dict[str, str]:
    """Environment for a child Django process bound to the test database and Redis db."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="controlplane.settings.test",
        DATABASE_URL=database_url(),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def in_thread(fn, *args, **kwargs):
    """Run fn in a fresh thread: Playwright's loop may own this one."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args, **kwargs).result(timeout=60)


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def wait_for(predicate, *, timeout_s: float, what: str, proc=None, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"{what}: process exited with {proc.returncode}\n{tail}")
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log else ""
    raise RuntimeError(f"{what}: not ready after {timeout_s} s\n{tail}")


# ---------------------------------------------------------------- Triton


def session_node_key():
    """The session's node key (a NodeKey under the configured header)."""
    from integrations.triton.restricted import NodeKey

    return NodeKey(settings.SWITCHYARD_TRITON_KEY_HEADER, os.environ[NODE_KEY_ENV])


@pytest.fixture(scope="session")
def triton_cluster(tmp_path_factory):
    """Two real tritonserver nodes (explicit mode, free ports, model control restricted to
    the session's node key), stopped at session end."""
    from integrations.triton.local import start_cluster

    work = tmp_path_factory.mktemp("triton")
    cluster = start_cluster(2, work, metrics_interval_ms=1000, node_key=session_node_key())
    _SESSION_CLUSTERS.append(cluster)
    try:
        yield cluster
    finally:
        _SESSION_CLUSTERS.remove(cluster)
        cluster.stop()


_SESSION_CLUSTERS: list = []


def _signal_name(code: int | None) -> str:
    import signal

    if code is None or code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete():
    """A transactional test ends with Django's flush: one TRUNCATE of every table, about
    0.3 s of PostgreSQL each time (new files for every relation, synced at its commit),
    against 0.02 s for a DELETE of the few rows a test leaves. The same tables are emptied
    the same way otherwise: in one transaction, Django's foreign keys checked at its commit,
    sequences left as they are, post_migrate sent after as before. Tables whose triggers
    refuse a DELETE (the append-only audit log) are truncated as before."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        with self.connection.cursor() as cursor:  # append-only tables refuse a DELETE
            cursor.execute("SELECT DISTINCT tgrelid::regclass::text FROM pg_trigger "
                           "WHERE NOT tgisinternal")  # fmt: skip
            guarded = {name.strip('"') for (name,) in cursor.fetchall()}
        deleted = [t for t in tables if t not in guarded]
        statements = ["SET CONSTRAINTS ALL DEFERRED"]
        statements += [f"{style.SQL_KEYWORD('DELETE FROM')} {self.quote_name(t)}" for t in deleted]
        return statements + truncate(self, style, [t for t in tables if t in guarded])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "sql_flush", sql_flush)
        yield


@pytest.fixture(scope="session", autouse=True)
def _own_traffic_counters_left_behind():
    """Probes, warm-ups and smoke tests of the session count their requests in the test
    Redis (deployments/own_traffic.py): none of those counters outlives the session."""
    yield
    import redis

    from deployments.own_traffic import key_prefix

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
        keys = list(client.scan_iter(f"{key_prefix()}*"))
        if keys:
            client.delete(*keys)
        client.close()
    except redis.RedisError:
        pass  # Redis is away (a fault test stopped it): its counters expire on their own


@pytest.fixture(autouse=True)
def _session_nodes_outlive_each_test():
    """The shared nodes must outlive every test. One that died during a test fails that test
    (its exit status and log tail say why) and is started again, empty, so that one death is
    reported where it happened instead of as every later test's connection refused."""
    yield
    nodes = [node for cluster in _SESSION_CLUSTERS for node in cluster.nodes]
    dead = [node for node in nodes if not node.is_running()]
    if not dead:
        return
    report = [
        f"{node.name} ({_signal_name(node.process.returncode if node.process else None)}); "
        f"log {node.log_path}:\n{node.log_tail(40)}"
        for node in dead
    ]
    report.append(_memory_picture())
    for cluster in _SESSION_CLUSTERS:
        for node in cluster.nodes:
            if node in dead:
                cluster.restart(node)
    pytest.fail("a shared Triton node died during this test: " + "\n".join(report))


def _memory_picture(top: int = 8) -> str:
    """Free memory and the largest processes (a SIGKILL with memory short is the OOM killer)."""
    meminfo = Path("/proc/meminfo").read_text().splitlines()[:3]
    sizes = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines())
        except (OSError, ValueError):
            continue
        rss = fields.get("VmRSS", "0 kB").split()[0]
        sizes.append((int(rss), fields.get("Name", "?").strip(), status.parent.name))
    largest = ", ".join(f"{name}[{pid}] {kb // 1024} MiB" for kb, name, pid in sorted(sizes)[-top:])
    return f"{'; '.join(meminfo)}; largest: {largest}"


# ---------------------------------------------------------------- migrations


def migrate_to(targets: list[tuple[str, str]]):
    """Migrate the test database to `targets` ((app, migration) pairs) and return that
    state's apps. A test that does takes `latest_migrations_after`."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def latest_migrations_after():
    """Back to the latest migrations after the test, so later tests find every table and
    column, a failure too (going back one app's migration may also unapply other apps' that
    depend on it)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


# ---------------------------------------------------------------- Celery


def drop_queues(queue: str) -> None:
    """Delete the lanes' queues of `queue`, their bindings, and unacked messages routed to them
    (a SIGKILLed worker leaves its message unacked; nothing may run it later)."""
    import json

    import redis

    from controlplane.queues import all_queues

    names = all_queues(queue)
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        for name in names:
            client.delete(name, f"_kombu.binding.{name}", f"_kombu.binding_permanent.{name}")
        for tag, raw in client.hgetall("unacked").items():
            try:
                _, exchange, routing_key = json.loads(raw)
            except (ValueError, TypeError):
                continue
            if exchange in names or routing_key in names:
                client.hdel("unacked", tag)
                client.zrem("unacked_index", tag)
    finally:
        client.close()


@pytest.fixture(scope="session", autouse=True)
def _session_queues_dropped():
    """Tasks the code under test queued on the session's own queues with no worker serving
    them (a CLI test's plan tick, say) go with the session, as do their bindings and the
    keys under the session's prefix."""
    yield
    import redis

    with contextlib.suppress(redis.RedisError):  # Redis away (a fault test stopped it)
        drop_queues(settings.CELERY_TASK_DEFAULT_QUEUE)
        # And every key under the session's own prefix (the collector's status among them).
        drop_prefixed(os.environ["SWITCHYARD_TEST_CACHE_PREFIX"])


def drop_prefixed(prefix: str) -> None:
    """Delete every key under `prefix:` in the tests' Redis database."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        keys = list(client.scan_iter(f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
    finally:
        client.close()


class WorkerHandle:
    """A worker process; one started on a queue of its own (`owns_queue`) drops that queue
    and its bindings from Redis when stopped."""

    def __init__(
        self, proc: subprocess.Popen, queue: str, hostname: str, log: Path, owns_queue: bool
    ):
        self.proc, self.queue, self.hostname, self.log = proc, queue, hostname, log
        self.owns_queue = owns_queue

    def stop(self) -> None:
        stop_process(self.proc)
        if self.owns_queue:
            drop_queues(self.queue)


def start_celery_worker(
    log: Path,
    queue: str | None = None,
    *,
    lanes: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> WorkerHandle:
    """Start a real Celery worker process for base queue `queue` (a new one by default) and
    wait for it. It serves every lane's queue of that base (controlplane/queues.py) unless
    `lanes` names the queues it serves; `env` adds environment variables (or overrides these:
    its storage root is the settings' unless `env` names one)."""
    from controlplane.celery import app
    from controlplane.queues import all_queues

    owns_queue = queue is None
    queue = queue or f"test-{uuid.uuid4().hex[:10]}"
    hostname = f"{uuid.uuid4().hex[:6]}-{queue}@localhost"
    args = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "controlplane",
        "worker",
        "--pool=solo",
        "--concurrency=1",
        "--without-gossip",
        "--without-mingle",
        "-Q",
        ",".join(lanes or all_queues(queue)),
        "-n",
        hostname,
        "--loglevel=INFO",
    ]
    environment = child_environment(
        **{
            "SWITCHYARD_CELERY_QUEUE": queue,
            "SWITCHYARD_STORAGE_ROOT": str(settings.SWITCHYARD_STORAGE_ROOT),
            **(env or {}),
        }
    )
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT
        )
    handle = WorkerHandle(proc, queue, hostname, log, owns_queue)
    try:
        wait_for(
            lambda: app.control.ping(destination=[hostname], timeout=0.5),
            timeout_s=60,
            what="celery worker",
            proc=proc,
            log=log,
        )
    except BaseException:
        handle.stop()
        raise
    return handle


@pytest.fixture
def celery_worker(transactional_db, tmp_path):
    """A real Celery worker process on its own queue, reading the test database."""
    handle = start_celery_worker(tmp_path / "worker.log")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def lanes(django_db_setup, tmp_path_factory):
    """A worker per lane for the whole session, on a base queue of its own (tests/ticking.py):
    release ticks and the loads they start run there as in production. Its artifacts live in
    one session folder (`lanes.storage`; content-addressed, so tests share it safely)."""
    from tests.ticking import Lanes

    root = tmp_path_factory.mktemp("lanes")
    env = {"SWITCHYARD_STORAGE_ROOT": str(root / "artifacts"), "SWITCHYARD_DEPLOY_DRAIN_S": "0.2"}
    workers = Lanes(root, env=env)
    workers.storage = root / "artifacts"
    try:
        yield workers.start()
    finally:
        workers.stop()
        drop_queues(workers.base)


# ---------------------------------------------------------------- ASGI server


class SharedDaphne:
    """The session's daphne (the real ASGI app on the test database): started on first use,
    and again if it died or if the environment a child would get differs from the one it
    was started with (a test that set SWITCHYARD_* variables gets a server that reads
    them, and the next test one without them); stopped at session end."""

    def __init__(self, log: Path):
        self.log, self.address = log, ""
        self._proc, self._stack, self._env = None, None, None

    def running(self) -> str:
        env = {k: v for k, v in child_environment().items() if not k.startswith("PYTEST_")}
        if self._proc is None or self._proc.poll() is not None or env != self._env:
            self.stop()
            self._stack = contextlib.ExitStack()
            self._proc, port = self._stack.enter_context(daphne_process(self.log, mode="ab"))
            self.address, self._env = f"127.0.0.1:{port}", env
        return self.address

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._proc, self._stack, self._env = None, None, None


@pytest.fixture(scope="session")
def shared_daphne(django_db_setup, tmp_path_factory):
    """One daphne for the tests that only talk to the app (each test's rows are its own:
    the database is flushed after each transactional test, and the server reads what the
    running test wrote). Its log is appended to for the whole session."""
    shared = SharedDaphne(tmp_path_factory.mktemp("daphne") / "daphne.log")
    try:
        yield shared
    finally:
        shared.stop()


@pytest.fixture
def daphne_server(transactional_db, shared_daphne):
    """'host:port' of the real ASGI app (HTTP + websockets) served by the session's daphne."""
    return shared_daphne.running()


@pytest.fixture
def daphne_log(shared_daphne):
    """The shared daphne's log as this test sees it: read() gives what was written since the
    test began."""
    return LogSince(shared_daphne.log)


class LogSince:
    """A log file read from where it ended when this object was made."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def read(self) -> str:
        with open(self.path, "rb") as log:
            log.seek(self.offset)
            return log.read().decode(errors="replace")


def serve_daphne(log: Path, **env: str):
    """Start daphne on a free port (its environment plus `env`), yield 'host:port' once it
    answers, stop it after."""
    with daphne_process(log, **env) as (_proc, port):
        yield f"127.0.0.1:{port}"


@contextlib.contextmanager
def daphne_process(log: Path, mode: str = "wb", **env: str):
    """Like serve_daphne, yielding (the daphne process, its port): for tests that watch it.
    The log is opened with `mode` ("ab" appends)."""
    from integrations.triton.local import free_ports

    (port,) = free_ports(1)
    with open(log, mode) as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "controlplane.asgi:application",
            ],
            cwd=ROOT,
            env=child_environment(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        import http.client

        def answers() -> bool:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            try:
                conn.request("GET", "/login/")
                return conn.getresponse().status == 200
            except OSError:
                return False
            finally:
                conn.close()

        wait_for(answers, timeout_s=30, what="daphne", proc=proc, log=log)
        yield proc, port
    finally:
        stop_process(proc)


# ---------------------------------------------------------------- users


@pytest.fixture
def make_user(django_user_model):
    """make_user("ada", role="algorithm") -> a user with that group and password 'pw-<name>'."""
    from django.contrib.auth.models import Group

    def _make(username: str, *, role: str | None = None, superuser: bool = False):
        user = django_user_model.objects.create_user(
            username=username,
            password=f"pw-{username}",
            is_superuser=superuser,
            is_staff=superuser,
        )
        if role:
            user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return _make


# ---------------------------------------------------------------- browser


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Debian's Chromium; Playwright never downloads a browser here."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail("Chromium is not installed: run `make test` (it installs Debian's chromium).")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


# Files started first so that xdist's workers (each file whole to one worker, in collection
# order) share out the rest meanwhile instead of waiting on them at the end: the compose kit
# builds its images on a machine that has none (about 8 minutes of one worker's setup;
# docs/DEVELOPING.md, the suite's time). Only that one: other heavy files started beside it
# would slow each other down on 2 cores.
FIRST_FILES = ["tests/install/test_compose_e2e.py"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Browser tests run last. pytest-playwright's session keeps an event loop running in the
    main thread from the first browser test on, and a sync test that then calls an async view
    (the `?wait=` details) through Django's test client would find that loop and fail.
    `make test` gives each file to one xdist worker whole, so a file that held both kinds
    would run its browser tests among the rest there: refused."""

    def browser(item) -> bool:
        return item.get_closest_marker("browser") is not None or "page" in getattr(
            item, "fixturenames", ()
        )

    kinds: dict[str, set[bool]] = {}
    for item in items:
        kinds.setdefault(item.nodeid.split("::")[0], set()).add(browser(item))
    mixed = sorted(path for path, seen in kinds.items() if len(seen) > 1)
    if mixed:
        raise pytest.UsageError(f"browser tests share a file with others: {', '.join(mixed)}")

    def first_files_first(item) -> int:
        path = item.nodeid.split("::")[0]
        return FIRST_FILES.index(path) if path in FIRST_FILES else len(FIRST_FILES)

    items.sort(key=lambda item: (browser(item), first_files_first(item)))
