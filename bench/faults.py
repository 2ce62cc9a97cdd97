"""Faults injected into real processes; for each, the seconds to recover, the failed client
requests and the rows lost, every round printed.

1. worker SIGKILLed mid-push (a model whose load takes 12 s): seconds from the kill to the
   deployment finished as failed by the sweep (lease SWITCHYARD_WORK_LEASE_S, sweeps every
   second here), and whether the model's next deployment is accepted; rows lost = rows of
   the deployment that stayed unfinished (goal 0).
2. a Triton node SIGKILLed behind a real nginx under steady client traffic: failed client
   requests until the router drops it, seconds until it rejoins after a restart (reconcile
   and the router sync every second), and failed requests while it was out (goal 0).
3. PostgreSQL refusing the collector for 5 s (a TCP gate in front of the real one): whether
   the collector process lived, and seconds from the database answering again to the
   collector reading its nodes.
4. the long lane busy with a benchmark: seconds from queueing a release tick to its end on
   the releases lane (the tick goal is within a second), beside the same with one shared
   queue and worker that the benchmark holds (the issue's "before").
5. a Triton node SIGKILLed while a release holds 20% (on_node_loss: hold), restarted after
   3 s, the release ticked as production does (`releases.tick_active` queued every second as
   beat does, a worker on the releases lane and one on the fleet lane running the loads;
   reconcile and the router sync in this process): seconds from the kill to the release
   saying it holds, from the restart to it going on (reconcile reloads the node, the router
   takes it back), failed client requests, and the release's end (goal SUCCEEDED, 0 failed
   requests once the node is back).
6. Redis SIGKILLed under a running web process (a real daphne on a Redis and a PostgreSQL of
   the bench's own, tests/faults/own_services.py; the shared 6379 and 5432 are never
   touched) and started again, empty, after 3 s, with a client asking for a websocket ticket
   (POST /api/v1/auth/ws-ticket/, token: the ticket lives in Redis) every 0.1 s: seconds
   from the restart to the first 200, requests answered 503 and with a connection error
   during the outage, and answered 500 (goal 0).
7. PostgreSQL stopped (pg_ctl stop -m fast) under the same web process (pool of 2
   connections) and started again after 3 s, a client sending an API GET
   (/api/v1/clusters/) every 0.1 s: the same figures, and a
   write (POST /api/v1/clusters/ with an Idempotency-Key) cut off mid-transaction by the
   stop (its audit row waits on a lock held by the bench, as in test_restarts.py), retried
   once served: rows it left half-written (goal 0), the retry's status (goal 201) and the
   (cluster, audit) rows after it (goal (1, 1)).

Usage: .venv/bin/python bench/faults.py [rounds]
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
from bench.common import bench_node_key, drop_queued_tasks, use_bench_queue, wait_until  # noqa: E402

use_bench_queue()
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchyard_bench")
LEASE_S = 3.0


def _worker(log: Path, queues: list[str], env: dict | None = None) -> subprocess.Popen:
    from controlplane.celery import app
    from tests.conftest import child_environment

    name = f"bench-{os.getpid()}-{len(queues)}-{time.monotonic_ns()}@localhost"
    args = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool=solo"]
    args += ["--without-gossip", "--without-mingle", "-Q", ",".join(queues), "-n", name]
    from django.conf import settings

    environment = child_environment(
        SWITCHYARD_STORAGE_ROOT=str(settings.SWITCHYARD_STORAGE_ROOT), **(env or {})
    )
    environment["DJANGO_SETTINGS_MODULE"] = "controlplane.settings.dev"
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, cwd=ROOT, env=environment, stdout=out, stderr=out)
    wait_until(lambda: app.control.ping(destination=[name], timeout=0.5), 60)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def push_kill(world, work: Path, round_no: int) -> dict:
    from controlplane.queues import all_queues
    from deployments.models import Deployment, DeploymentNode
    from deployments.services import deployment_create
    from deployments.sweep import deployments_lost_sweep
    from integrations.triton.client import TritonClient
    from models_registry.services import model_create
    from tests.faults.conftest import register, slow_entries

    name = f"slow_push_{round_no}"
    model = model_create(name=name, team="bench", actor=world["user"])
    version = register(model, world["user"], slow_entries(name))
    base = os.environ["SWITCHYARD_CELERY_QUEUE"]
    worker = _worker(work / "push.log", all_queues(base), {"SWITCHYARD_WORK_LEASE_S": "3"})
    deployment = deployment_create(cluster=world["staging"], version=version, actor=world["user"])
    rows = DeploymentNode.objects.filter(deployment=deployment)
    wait_until(lambda: rows.filter(status=DeploymentNode.Status.LOADING).exists(), 30)
    worker.kill()
    worker.wait(10)
    killed = time.monotonic()
    wait_until(lambda: deployments_lost_sweep() or None, 30, step=1.0)
    recovered = time.monotonic() - killed
    again = deployment_create(cluster=world["staging"], version=version, actor=world["user"])
    Deployment.objects.filter(pk=again.pk).update(status=Deployment.Status.FAILED)
    lost = Deployment.objects.filter(pk=deployment.pk).exclude(status="failed").count()
    node = world["node"]
    with TritonClient(node.http_url, node.grpc_url, node_key=node.node_key) as client:
        client.wait_ready(name, ["1"], timeout_s=60)
        client.unload(name)
    return {"recover_s": recovered, "next_accepted": True, "rows_lost": lost}


def node_kill(world, fleet, port: int) -> dict:
    from deployments.reconcile import cluster_reconcile
    from releases import routing
    from tests.releases.test_release_flow import Traffic

    cluster, two = world["prod"], fleet.nodes[2]
    cluster_reconcile(cluster=cluster)
    upstreams = lambda: routing.router_for(cluster).current().upstreams  # noqa: E731
    with Traffic(port, "bench_routed") as traffic:
        time.sleep(2)
        fleet.kill(two)
        killed = time.monotonic()
        wait_until(lambda: routing.router_sync(cluster) or None, 60, step=1.0)
        dropped_s, failed_until_drop = time.monotonic() - killed, traffic.failed
        fleet.restart(two)
        restarted = time.monotonic()

        def rejoined():
            cluster_reconcile(cluster=cluster)
            routing.router_sync(cluster)
            return two.http_url in upstreams()

        wait_until(rejoined, 120, step=1.0)
        rejoin_s, failed_while_out = (
            time.monotonic() - restarted,
            traffic.failed - failed_until_drop,
        )
        time.sleep(1)
    return {
        "dropped_s": dropped_s,
        "failed_until_drop": failed_until_drop,
        "rejoin_s": rejoin_s,
        "failed_while_out": failed_while_out,
        "ok": traffic.ok,
    }


def node_loss_at_20(world, fleet, port: int, round_no: int, work: Path) -> dict:
    from controlplane.queues import FLEET, LONG, RELEASES, lane_queue
    from releases.tasks import tick_active

    base = os.environ["SWITCHYARD_CELERY_QUEUE"]
    env = {
        "SWITCHYARD_ROUTER_DOWN_GRACE_S": "3.0",
        "SWITCHYARD_DEPLOY_DRAIN_S": "0.2",
        "SWITCHYARD_REPOSITORY_ROOTS": str(work),
        "SWITCHYARD_ROUTER_ROOTS": str(work),
    }
    ticks = _worker(work / "loss-releases.log", [lane_queue(base, RELEASES)], env)
    loads = _worker(work / "loss-fleet.log", [lane_queue(base, FLEET), lane_queue(base, LONG)], env)
    try:
        return _node_loss_at_20(world, fleet, port, round_no, tick_active)
    finally:
        _stop(ticks)
        _stop(loads)


def _node_loss_at_20(world, fleet, port: int, round_no: int, tick_active) -> dict:
    from django.conf import settings

    from deployments.reconcile import cluster_reconcile
    from models_registry.services import model_create
    from releases import routing
    from releases.models import Release
    from releases.services import release_create
    from tests.registry.archives import register_risk_score_as
    from tests.releases.test_release_flow import Traffic

    cluster, two, user = world["prod"], fleet.nodes[2], world["user"]
    model = model_create(name=f"bench_loss{round_no}", team="bench", actor=user)
    _deployed(cluster, register_risk_score_as(model, user, 1), user)
    routing.router_for(cluster).apply(routing.router_state(cluster, []))
    candidate = register_risk_score_as(model, user, 2)
    release = release_create(
        cluster=cluster,
        candidate=candidate,
        actor=user,
        steps=[20, 100],
        step_interval_s=2,
        analysis={"min_requests": 10, "latency_tolerance": 5},
        drain_s=0.5,
        progress_deadline_s=120,
    )

    def beat(done) -> Release:  # what beat runs, until `done`: ticks on the workers' lanes
        deadline, queued = time.monotonic() + 120, 0.0
        while time.monotonic() < deadline:
            if time.monotonic() - queued >= 1.0:  # beat's releases-tick entry: every second
                tick_active.apply_async(expires=settings.SWITCHYARD_TICK_EXPIRES_S)
                queued = time.monotonic()
            cluster_reconcile(cluster=cluster)
            routing.router_sync(cluster)
            row = Release.objects.get(pk=release.pk)
            if done(row):
                return row
            time.sleep(0.3)
        raise RuntimeError(f"release {row.phase}: {row.reason}")

    with Traffic(port, model.name) as traffic:
        beat(lambda r: r.phase == "PROGRESSING" and r.router_weight == 20.0)
        fleet.kill(two)
        killed = time.monotonic()
        beat(lambda r: r.reason.startswith("holding at 20%"))
        hold_s = time.monotonic() - killed
        time.sleep(3)
        fleet.restart(two)
        restarted, failed_at_restart = time.monotonic(), traffic.failed
        beat(lambda r: "resuming at 20%" in r.reason or r.step_index > 0 or not r.is_active)
        resume_s = time.monotonic() - restarted
        ended = beat(lambda r: not r.is_active)
    return {
        "hold_s": hold_s,
        "resume_s": resume_s,
        "failed": traffic.failed,
        "failed_after_restart": traffic.failed - failed_at_restart,
        "ok": traffic.ok,
        "phase": ended.phase,
    }


def _deployed(cluster, version, user) -> None:
    from deployments.executor import deployment_run
    from deployments.services import deployment_create

    deployment = deployment_create(cluster=cluster, version=version, actor=user)
    assert deployment_run(deployment_id=deployment.pk).status == "succeeded"


def database_refused(world, work: Path, round_no: int) -> dict:
    from django.db import connection

    from deployments.services import node_create
    from telemetry.status import collector_status_read
    from tests.conftest import child_environment
    from tests.faults.tcp_gate import TcpGate

    db = connection.settings_dict
    port = int(db.get("PORT") or 5432)
    gate = TcpGate(port)
    gate.open()
    url = f"postgres://{db['USER']}@127.0.0.1:{gate.port}/{db['NAME']}"
    env = child_environment(DATABASE_URL=url, SWITCHYARD_TELEMETRY_TARGETS_REFRESH_S="1")
    env["DJANGO_SETTINGS_MODULE"] = "controlplane.settings.dev"
    log = work / "collector.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "run_collector", "--interval", "0.5"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        )

    def errors(node: str) -> int:
        return collector_status_read().scrape_errors.get(("bench-ghost", node), 0)

    try:
        wait_until(lambda: errors("ghost") > 0, 60)
        gate.close()
        # A node added while the collector cannot read the database: it shows once it can.
        name = f"late{os.getpid()}-{round_no}"  # status counts of earlier runs stay in Redis
        free = 20 + 2 * round_no  # nothing listens on these loopback ports either
        late = {
            "http_url": f"http://127.0.0.1:{free}",
            "metrics_url": f"http://127.0.0.1:{free + 1}/m",
        }
        node_create(cluster=world["ghost"], actor=world["user"], name=name, **late)
        time.sleep(5)
        alive = proc.poll() is None
        gate.open()
        opened = time.monotonic()
        wait_until(lambda: errors(name) > 0, 60)
        resumed = time.monotonic() - opened
    finally:
        gate.close()
        _stop(proc)
        _forget_scrape_errors("bench-ghost")
    return {"collector_lived": alive, "resume_s": resumed}


def _forget_scrape_errors(cluster: str) -> None:
    """Drop the collector's error counts for `cluster`'s nodes (a bench leaves nothing)."""
    import redis
    from django.conf import settings

    from telemetry import status

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        for key in client.hkeys(status.ERRORS_KEY):
            if key.decode().startswith(cluster + status.SEPARATOR):
                client.hdel(status.ERRORS_KEY, key)
    finally:
        client.close()


def busy_long_lane(world, work: Path) -> dict:
    from benchmarks.models import BenchmarkRun
    from benchmarks.services import benchmark_cancel, benchmark_create
    from controlplane.queues import LONG, all_queues, lane_queue
    from releases.tasks import tick

    base = os.environ["SWITCHYARD_CELERY_QUEUE"]
    out = {}
    for label, lanes in (("lanes", True), ("one queue", False)):
        # The "before": one worker on every queue, that the benchmark holds.
        queues = [lane_queue(base, LONG)] if lanes else all_queues(base)
        long_worker = _worker(work / "long.log", queues)
        urgent = _worker(work / "urgent.log", [base + ".releases"]) if lanes else None
        try:
            target = None if lanes else base  # the "before": everything on one queue
            run = benchmark_create(  # queued on the long lane, as the API does
                version=world["bench_version"],
                cluster=world["staging"],
                concurrency=[1],
                duration_s=20,
                actor=world["user"],
            )
            row = BenchmarkRun.objects.filter(pk=run.pk)
            wait_until(lambda row=row: row.get().status == "running", 30)
            started = time.monotonic()
            result = tick.apply_async(args=[2_000_000_000], queue=target, ignore_result=False)
            try:
                result.get(timeout=40)
                out[label] = time.monotonic() - started
            except Exception:
                out[label] = float("inf")
            if not row.get().is_finished:  # with one queue the tick ran after it ended
                benchmark_cancel(run=row.get(), actor=world["user"])
            wait_until(lambda row=row: row.get().is_finished, 60)
        finally:
            _stop(long_worker)
            if urgent is not None:
                _stop(urgent)
    return out


RESTART_OUTAGE_S = 3.0


class _Probe:
    """One authenticated API GET every 0.1 s from a thread; (monotonic time, status or
    "error") of each answer."""

    def __init__(
        self, base: str, token: str, path: str = "/api/v1/clusters/", method: str = "GET"
    ) -> None:
        import threading

        import httpx

        self.client = httpx.Client(
            base_url=base, timeout=5, headers={"Authorization": f"Token {token}"}
        )
        self.path, self.method, self.answers = path, method, []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.is_set():
            sent = time.monotonic()
            try:
                status = self.client.request(self.method, self.path).status_code
            except Exception:
                status = "error"
            self.answers.append((time.monotonic(), status))
            self.done.wait(max(0.0, 0.1 - (time.monotonic() - sent)))

    def __enter__(self):
        import logging

        self.quiet = logging.getLogger("httpx")
        self.level = self.quiet.level
        self.quiet.setLevel(logging.WARNING)  # not a line per request
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(10)
        self.client.close()
        self.quiet.setLevel(self.level)

    def first_200_after(self, t: float, timeout_s: float = 30):
        return wait_until(
            lambda: next((at for at, s in list(self.answers) if at > t and s == 200), None),
            timeout_s,
            step=0.05,
        )

    def figures(self, down: float, up: float) -> dict:
        first = self.first_200_after(up)
        during = [s for at, s in self.answers if down <= at <= first]
        return {
            "first_200_s": first - up,
            "answered_503": during.count(503),
            "answered_500": sum(1 for _, s in self.answers if s == 500),
            "connection_errors": during.count("error"),
            "requests": len(self.answers),
        }


def _own_stack(work: Path):
    """A Redis and a PostgreSQL of the bench's own (tests/faults/own_services.py, free ports;
    the shared 5432 and 6379 are never touched), the database migrated with a token, and a
    real daphne on both with a pool of 2 connections. A generator: close() stops it all."""
    from tests.conftest import serve_daphne
    from tests.faults.own_services import OwnPostgres, OwnRedis, migrate_and_seed

    folder = work / "own-redis"
    folder.mkdir()
    redis_server, pg, server = OwnRedis(folder), OwnPostgres(), None
    try:
        redis_server.start()
        pg.init("switchyard")
        url = pg.url("switchyard")
        env = {"DATABASE_URL": url, "SWITCHYARD_TEST_REDIS_URL": redis_server.url}
        token = migrate_and_seed(env)
        server = serve_daphne(
            work / "own-daphne.log",
            **env,
            SWITCHYARD_DATABASE_POOL_SIZE="2",
            SWITCHYARD_DATABASE_POOL_TIMEOUT_S="1.5",
            SWITCHYARD_DATABASE_APPLICATION_NAME="bench-restarts",
            SWITCHYARD_HEALTH_WORKER_PING_TIMEOUT_S="0.2",
        )
        base = f"http://{next(server)}"
        yield {"redis": redis_server, "pg": pg, "url": url, "base": base, "token": token}
    finally:
        if server is not None:
            server.close()
        redis_server.kill()
        pg.remove()


def redis_restart(stack) -> dict:
    """Redis SIGKILLed under the web process and started again (empty) after ~3 s; the probe
    asks for a websocket ticket, which lives in Redis (a page's live socket needs one)."""
    with _Probe(stack["base"], stack["token"], "/api/v1/auth/ws-ticket/", "POST") as probe:
        probe.first_200_after(time.monotonic())
        time.sleep(1)
        stack["redis"].kill()
        down = time.monotonic()
        time.sleep(RESTART_OUTAGE_S)
        stack["redis"].start()
        up = time.monotonic()
        probe.first_200_after(up)
        time.sleep(1)
    return probe.figures(down, up)


def _waiting_on_a_lock(url: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        query += " AND wait_event_type = 'Lock'"
        return conn.execute(query, ["bench-restarts"]).fetchone()[0] > 0


def _rows(url: str, name: str) -> tuple[int, int]:
    """(cluster rows named `name`, audit rows of a cluster created under that name)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        clusters = conn.execute(
            "SELECT count(*) FROM deployments_tritoncluster WHERE name = %s", [name]
        ).fetchone()[0]
        audits = conn.execute(
            "SELECT count(*) FROM audit_auditevent WHERE action = 'cluster.created'"
            " AND (object_repr = %s OR details::text LIKE %s)",
            [name, f"%{name}%"],
        ).fetchone()[0]
    return clusters, audits


def postgres_restart(stack, round_no: int) -> dict:
    """PostgreSQL stopped (`pg_ctl stop -m fast`) under the web process with a write cut off
    mid-transaction (its audit row waits on a lock held here, as in test_restarts.py),
    started again after ~3 s; the write is retried with its Idempotency-Key once served."""
    import threading

    import httpx
    import psycopg

    pg, url = stack["pg"], stack["url"]
    name, key = f"bench-cut-{os.getpid()}-{round_no}", f"bench-{os.getpid()}-{round_no}"
    headers = {"Authorization": f"Token {stack['token']}", "Idempotency-Key": key}
    body = {"name": name, "environment": "staging"}
    answers: list = []

    def write() -> None:
        with httpx.Client(base_url=stack["base"], timeout=30, headers=headers) as client:
            try:
                answers.append(client.post("/api/v1/clusters/", json=body).status_code)
            except Exception:
                answers.append("error")

    with _Probe(stack["base"], stack["token"]) as probe:
        probe.first_200_after(time.monotonic())
        time.sleep(1)
        holder = psycopg.connect(url)
        holder.execute("LOCK TABLE audit_auditevent IN ACCESS EXCLUSIVE MODE")
        writer = threading.Thread(target=write)
        writer.start()
        try:
            wait_until(lambda: _waiting_on_a_lock(url), 10)
            pg.stop()
            down = time.monotonic()
        finally:
            writer.join(30)
            holder.close()
        time.sleep(max(0.0, down + RESTART_OUTAGE_S - time.monotonic()))
        pg.start()
        up = time.monotonic()
        probe.first_200_after(up)
        half_written = sum(_rows(url, name))  # the cut-off write left nothing (goal 0)
        with httpx.Client(base_url=stack["base"], timeout=30, headers=headers) as client:
            retried = client.post("/api/v1/clusters/", json=body).status_code
        time.sleep(1)
    figures = probe.figures(down, up)
    figures.update(
        cut_off_write=answers[0] if answers else None,
        half_written_rows=half_written,
        retry=retried,
        stored_after_retry=_rows(url, name),
    )
    return figures


def _world(fleet, work: str, port: int):
    from django.contrib.auth import get_user_model

    from deployments.executor import deployment_run
    from deployments.services import cluster_create, deployment_create, node_create
    from models_registry.services import model_create, team_create
    from tests.registry.archives import register_risk_score_as

    user = get_user_model().objects.create(username="bench", is_superuser=True)
    team_create(name="bench", actor=user)
    key = {"api_key": fleet.node_key.value}
    staging = cluster_create(
        actor=user, name="bench-staging", environment="staging", router={}, **key
    )
    router = {"driver": "nginx", "listen": f"127.0.0.1:{port}", "prefix_dir": f"{work}/router"}
    prod = cluster_create(
        actor=user, name="bench-prod", environment="production", router=router, **key
    )
    a, b, c = fleet.nodes
    for cluster, nodes in ((staging, [a]), (prod, [b, c])):
        for node in nodes:
            urls = {"http_url": node.http_url, "grpc_url": node.grpc_url}
            node_create(cluster=cluster, actor=user, name=node.name, **urls)
    ghosts = cluster_create(actor=user, name="bench-ghost", environment="staging", router={})
    ghost = {"http_url": "http://127.0.0.1:9", "metrics_url": "http://127.0.0.1:11/metrics"}
    node_create(cluster=ghosts, actor=user, name="ghost", **ghost)  # the collector's target
    routed = model_create(name="bench_routed", team="bench", actor=user)
    deployment = deployment_create(
        cluster=prod, version=register_risk_score_as(routed, user, 1), actor=user
    )
    assert deployment_run(deployment_id=deployment.pk).status == "succeeded"
    bench_model = model_create(name="bench_lane", team="bench", actor=user)
    return {
        "user": user,
        "staging": staging,
        "prod": prod,
        "ghost": ghosts,
        "node": a,
        "bench_version": register_risk_score_as(bench_model, user, 1),
    }


def _line(name: str, values: list[float], unit: str = "s") -> str:
    shown = ", ".join(f"{v:.2f}" for v in values)
    return f"{name}: [{shown}] {unit}, median {statistics.median(values):.2f} {unit}"


def _report(rounds: list[dict]) -> None:
    for key in ("push", "node", "db", "lane", "loss", "redis", "pg"):
        print(f"-- {key}")
        for i, r in enumerate(rounds, 1):
            print(f"  round {i}: {r[key]}")
    print(
        _line("worker killed mid-push: kill -> finished", [r["push"]["recover_s"] for r in rounds])
    )
    print(f"  rows lost (goal 0): {sum(r['push']['rows_lost'] for r in rounds)}")
    print(_line("node killed: kill -> out of the router", [r["node"]["dropped_s"] for r in rounds]))
    print(f"  failed requests until dropped: {[r['node']['failed_until_drop'] for r in rounds]}")
    print(
        _line("node restarted empty: restart -> rejoined", [r["node"]["rejoin_s"] for r in rounds])
    )
    print(f"  failed while out (goal 0): {[r['node']['failed_while_out'] for r in rounds]}")
    print(f"collector lived through refusals: {[r['db']['collector_lived'] for r in rounds]}")
    print(
        _line("database back -> collector reads its nodes", [r["db"]["resume_s"] for r in rounds])
    )
    print(_line("tick under a busy long lane, lanes", [r["lane"]["lanes"] for r in rounds]))
    print(_line("tick under a busy long lane, one queue", [r["lane"]["one queue"] for r in rounds]))
    loss = [r["loss"] for r in rounds]
    print(_line("node killed at 20%: kill -> release holds", [x["hold_s"] for x in loss]))
    print(_line("node restarted: restart -> release goes on", [x["resume_s"] for x in loss]))
    print(
        f"  failed requests: {[x['failed'] for x in loss]}, once back (goal 0): "
        f"{[x['failed_after_restart'] for x in loss]}; ends {[x['phase'] for x in loss]}"
    )
    for key, label in (("redis", "Redis"), ("pg", "PostgreSQL")):
        cases = [r[key] for r in rounds]
        print(_line(f"{label} restarted: start -> first 200", [x["first_200_s"] for x in cases]))
        print(
            f"  answered 503: {[x['answered_503'] for x in cases]}, 500 (goal 0): "
            f"{[x['answered_500'] for x in cases]}, connection errors: "
            f"{[x['connection_errors'] for x in cases]}"
        )
    pgs = [r["pg"] for r in rounds]
    print(
        f"  cut-off write answered {[x['cut_off_write'] for x in pgs]}, half-written rows "
        f"(goal 0): {[x['half_written_rows'] for x in pgs]}, retry (goal 201): "
        f"{[x['retry'] for x in pgs]}, (cluster, audit) rows after: "
        f"{[x['stored_after_retry'] for x in pgs]}"
    )


def main(rounds: int) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    from integrations.triton.local import free_ports, start_cluster
    from releases import routing

    work = tempfile.mkdtemp()
    settings.SWITCHYARD_WORK_LEASE_S = LEASE_S
    settings.SWITCHYARD_ROUTER_DOWN_GRACE_S = 3.0
    settings.SWITCHYARD_DEPLOY_DRAIN_S = 0.2
    os.environ["DATABASE_URL"] = (
        f"postgres://{connection.settings_dict['USER']}@127.0.0.1:"
        f"{connection.settings_dict.get('PORT') or 5432}/{connection.settings_dict['NAME']}"
    )
    print(f"lease {LEASE_S:g} s, router grace 3 s, sweeps and syncs every second")
    try:
        with start_cluster(3, Path(work), node_key=bench_node_key()) as fleet:
            settings.SWITCHYARD_STORAGE_ROOT = Path(work) / "artifacts"
            settings.SWITCHYARD_REPOSITORY_ROOTS = settings.SWITCHYARD_ROUTER_ROOTS = [work]
            (port,) = free_ports(1)
            world = _world(fleet, work, port)
            router = routing.router_for(world["prod"])
            router.apply(routing.router_state(world["prod"], []))
            results = []
            stack = _own_stack(Path(work))
            try:
                own = next(stack)
                for i in range(rounds):
                    results.append(
                        {
                            "push": push_kill(world, Path(work), i),
                            "node": node_kill(world, fleet, port),
                            "db": database_refused(world, Path(work), i),
                            "lane": busy_long_lane(world, Path(work)),
                            "loss": node_loss_at_20(world, fleet, port, i, Path(work)),
                            "redis": redis_restart(own),
                            "pg": postgres_restart(own, i),
                        }
                    )
                    print(f"round {i + 1}: {results[-1]}", flush=True)
            finally:
                stack.close()
                router.stop()
            _report(results)
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)
        drop_queued_tasks()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
