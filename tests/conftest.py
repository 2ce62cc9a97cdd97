"""Fixtures that start real parts: Triton nodes, a Celery worker, a daphne server.

Every process a fixture starts is stopped by it, also when the test fails.
"""

import os
import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings

# Playwright's sync API keeps an event loop running in the test thread, so Django would take
# the ORM calls made there for calls from async code and refuse them.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"


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


@pytest.fixture(scope="session")
def triton_cluster(tmp_path_factory):
    """Two real tritonserver nodes (explicit mode, free ports), stopped at session end."""
    from integrations.triton.local import start_cluster

    work = tmp_path_factory.mktemp("triton")
    cluster = start_cluster(2, work, metrics_interval_ms=1000)
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


# ---------------------------------------------------------------- Celery


class WorkerHandle:
    def __init__(self, proc: subprocess.Popen, queue: str, hostname: str, log: Path):
        self.proc, self.queue, self.hostname, self.log = proc, queue, hostname, log

    def stop(self) -> None:
        stop_process(self.proc)


def start_celery_worker(
    log: Path,
    queue: str | None = None,
    *,
    lanes: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> WorkerHandle:
    """Start a real Celery worker process for base queue `queue` (a new one by default) and
    wait for it. It serves every lane's queue of that base (controlplane/queues.py) unless
    `lanes` names the queues it serves; `env` adds environment variables."""
    from controlplane.celery import app
    from controlplane.queues import all_queues

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
        SWITCHYARD_CELERY_QUEUE=queue,
        SWITCHYARD_STORAGE_ROOT=str(settings.SWITCHYARD_STORAGE_ROOT),
        **(env or {}),
    )
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT
        )
    handle = WorkerHandle(proc, queue, hostname, log)
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


# ---------------------------------------------------------------- ASGI server


@pytest.fixture
def daphne_server(transactional_db, tmp_path):
    """The real ASGI app (HTTP + websockets) served by daphne on a free port."""
    yield from serve_daphne(tmp_path / "daphne.log")


def serve_daphne(log: Path, **env: str):
    """Start daphne on a free port (its environment plus `env`), yield 'host:port' once it
    answers, stop it after."""
    from integrations.triton.local import free_ports

    (port,) = free_ports(1)
    with open(log, "wb") as out:
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
        yield f"127.0.0.1:{port}"
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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Browser tests run last. pytest-playwright's session keeps an event loop running in the
    main thread from the first browser test on, and a sync test that then calls an async view
    (the `?wait=` details) through Django's test client would find that loop and fail."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("browser") is not None
            or "page" in getattr(item, "fixturenames", ())
        )
    )
