"""Many console users at once while a gray release runs (issue #18).

A database (`switchyard_bench_dash`) and a Redis database (13, or BENCH_REDIS_DB) of the
bench's own; 2 real Triton nodes behind a real nginx router with steady inference traffic
(40 req/s); the web
served with the production settings (controlplane.settings.prod, DEBUG off, static files
collected) by the web command as `make demo` and the kits run it (controlplane/web_server.py:
one daphne process per core, SWITCHYARD_DATABASE_POOL_SIZE=10 each); a real Celery
worker per lane it needs (releases and fleet) and a real beat ticking the release, the collector
(1 s), the three at nice 10 as in `make demo`. Then N users sign in at once through the
console's login form (GET /login/ for the CSRF cookie, POST the form), each opens the live
websocket of the page it keeps open (release managers the cockpit's /ws/releases/<id>/,
dashboard users the cluster live page's /ws/clusters/<name>/) and loads one page a second
for S seconds, in turn: its role's home, the cluster page, the cluster's live page, the
release cockpit. A cockpit also fetches its live part whenever its socket says the release
changed (static/console/cockpit.js), and so do the release managers here.

Prints every figure: sign-in errors and times, page errors, page p50/p95 per page and over
all (goal p95 <= 500 ms), and the live-point delay: the time from a point's production to
its arrival on a websocket (goal p95 <= 1.5 s). For telemetry that is the point's `ts` (the
start of the collector tick that scraped it); for the release it is `last_analysis.at`
(the tick that judged an interval), both wall-clock times of the same machine. Also the CPU
each process used and the load average, so a miss can be placed.

Every round signs the users in afresh (new sessions) and loads pages for S seconds on the
same world; each round's figures are printed as it ends, the pool's numbers from /metrics
after it (checked out back to 0 once the users left).

Usage: .venv/bin/python bench/dashboard_load.py [--users 50] [--seconds 60] [--rounds 1]
"""

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB_NAME = "switchyard_bench_dash"
# Its own Redis database (BENCH_REDIS_DB to pick another where 13 is taken on a shared host).
REDIS_DB = int(os.environ.get("BENCH_REDIS_DB", "13"))
QUEUE = "switchyard-bench-dash"
CLUSTER = "bench-dash"
MODEL = "bench_dash"
TRAFFIC_RATE = 40.0  # req/s through the router, as `make demo`'s traffic (--rps 40)
WEB_POOL = "10"  # SWITCHYARD_DATABASE_POOL_SIZE of each web process, as `make demo` and the kits
sys.path.insert(0, str(ROOT))
from bench.common import (  # noqa: E402
    DB_SERVER,
    bench_node_key,
    bench_redis,
    cpu_seconds,
    throwaway_database,
    wait_until,
)


def _environment(work: Path) -> None:
    """Before django.setup(): this process and every child use the bench's own database,
    Redis database, queues and folders."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="controlplane.settings.prod",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_SECURE_SSL_REDIRECT="false",  # plain HTTP on loopback, as the compose kit
        SWITCHYARD_ALLOWED_TARGET_NETWORKS="127.0.0.0/8",  # the bench's nodes and router
        DATABASE_URL=f"{DB_SERVER}/{DB_NAME}",
        REDIS_URL=f"redis://127.0.0.1:6379/{REDIS_DB}",
        SWITCHYARD_CELERY_QUEUE=QUEUE,
        SWITCHYARD_VAR_DIR=str(work / "var"),
        SWITCHYARD_STORAGE_ROOT=str(work / "artifacts"),
        SWITCHYARD_REPOSITORY_ROOTS=str(work),
        SWITCHYARD_ROUTER_ROOTS=str(work),
        PYTHONUNBUFFERED="1",
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("CELERY_RESULT_BACKEND", None)


def _redis():
    return bench_redis(REDIS_DB)


def _database(action: str) -> None:
    throwaway_database(DB_NAME, action)


# ---------------------------------------------------------------- processes


def _start(name: str, args: list[str], work: Path, **env: str) -> subprocess.Popen:
    log = work / "logs" / f"{name}.log"
    log.parent.mkdir(exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stopped with its children
        )


def _stop(proc: subprocess.Popen) -> None:
    import signal

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def _control_plane(work: Path, port: int) -> dict[str, subprocess.Popen]:
    """The web command, the releases lane's worker, beat and the collector, as `make demo`
    runs them."""
    py, nice = sys.executable, ["nice", "-n", "10"]
    celery = [*nice, py, "-m", "celery", "-A", "controlplane"]
    web = [py, "-m", "controlplane.web_server", "-b", "127.0.0.1", "-p", str(port)]
    procs = {"web": _start("web", web, work, SWITCHYARD_DATABASE_POOL_SIZE=WEB_POOL)}
    hostname = f"bench-dash-releases-{os.getpid()}@localhost"
    worker = [*celery, "worker", "--loglevel=INFO", "--concurrency=2"]
    worker += [f"--queues={QUEUE}.releases", f"--hostname={hostname}"]
    procs["worker-releases"] = _start("worker-releases", worker, work)
    # The fleet lane: the serving-set loads a tick starts run there (and beat's reconcile,
    # router sync and health probes, as in `make demo`). The long lane is left unserved.
    fleet = [*celery, "worker", "--loglevel=INFO", "--concurrency=2", f"--queues={QUEUE}"]
    fleet.append(f"--hostname=bench-dash-fleet-{os.getpid()}@localhost")
    procs["worker"] = _start("worker", fleet, work)
    beat = [*celery, "beat", "--loglevel=INFO", f"--schedule={work / 'celerybeat-schedule'}"]
    procs["beat"] = _start("beat", beat, work)
    collector = [*nice, py, "manage.py", "run_collector", "--interval", "1"]
    procs["collector"] = _start("collector", collector, work)
    return procs


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
            return response.status == 200
    except OSError:
        return False


# ---------------------------------------------------------------- the users (own process)


def _users_process(conn, config: dict) -> None:
    import asyncio

    started = os.times()
    result = asyncio.run(_users(config))
    now = os.times()
    result["client_cpu_s"] = now.user + now.system - started.user - started.system
    conn.send(result)


async def _users(config: dict) -> dict:
    import asyncio

    import aiohttp

    out = {"signins": [], "pages": [], "delays": [], "ws_errors": [], "messages": 0}
    barrier = asyncio.Event()
    tasks = [
        asyncio.create_task(_user(i, user, config, out, barrier, aiohttp))
        for i, user in enumerate(config["users"])
    ]
    await asyncio.sleep(0.2)  # every user's session is made: sign in at once
    barrier.set()
    await asyncio.gather(*tasks)
    return out


async def _user(i: int, user: dict, config: dict, out: dict, barrier, aiohttp) -> None:
    import asyncio

    base, seconds = config["base"], config["seconds"]
    timeout = aiohttp.ClientTimeout(total=30)
    # Cookies for 127.0.0.1, the Secure ones too (production settings), as browsers treat
    # a loopback origin.
    jar = aiohttp.CookieJar(unsafe=True, treat_as_secure_origin=[base])
    async with aiohttp.ClientSession(base, cookie_jar=jar, timeout=timeout) as session:
        await barrier.wait()
        t0 = time.perf_counter()
        try:
            async with session.get("/login/") as r:
                await r.read()
                if r.status != 200:
                    raise RuntimeError(f"GET /login/ {r.status}")
            csrf = jar.filter_cookies(aiohttp.client.URL(base)).get("csrftoken")
            form = {
                "username": user["username"],
                "password": config["password"],
                "csrfmiddlewaretoken": csrf.value if csrf else "",
                "next": "",
            }
            async with session.post("/login/", data=form, allow_redirects=False) as r:
                await r.read()
                signed = "sessionid" in {c.key for c in jar}
                if r.status != 302 or not signed:
                    raise RuntimeError(f"POST /login/ {r.status}")
        except Exception as exc:
            out["signins"].append((False, time.perf_counter() - t0, repr(exc)[:200]))
            return
        out["signins"].append((True, time.perf_counter() - t0, ""))
        manager = user["role"] == "release-managers"
        ws_path = f"/ws/releases/{config['release']}/" if manager else f"/ws/clusters/{CLUSTER}/"
        live = f"/releases/{config['release']}/live/"
        refresh = _Refresher(session, live, out) if manager else None
        end = time.monotonic() + seconds
        try:
            ws = await session.ws_connect(ws_path, origin=base)  # as a browser sends it
        except Exception as exc:
            why = getattr(exc, "status", None) or repr(exc)[:120]
            out["ws_errors"].append(f"connect {ws_path}: {why}")
            ws = None
        reader = asyncio.create_task(_read(ws, out, refresh, end)) if ws else None
        pages = [
            ("home", "/"),
            ("cluster", f"/clusters/{CLUSTER}/"),
            ("cluster live", f"/clusters/{CLUSTER}/live/"),
            ("cockpit", f"/releases/{config['release']}/"),
        ]
        due, k = time.monotonic(), i  # users start at different pages
        while due < end:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            name, path = pages[k % len(pages)]
            k += 1
            await _load(session, name, path, out)
            due = max(due + 1.0, time.monotonic())  # one a second, no catch-up bursts
        if ws is not None:
            await ws.close()
            await reader
        if refresh is not None:
            await refresh.drain()


async def _load(session, name: str, path: str, out: dict, htmx: bool = False) -> None:
    headers = {"HX-Request": "true"} if htmx else {}
    t0 = time.perf_counter()
    try:
        async with session.get(path, allow_redirects=False, headers=headers) as r:
            body = await r.read()
            ok = r.status == 200
            status = r.status
    except Exception as exc:
        ok, status, body = False, repr(exc)[:120], b""
    out["pages"].append((name, ok, time.perf_counter() - t0, status, len(body)))


class _Refresher:
    """The cockpit's refresh: at most one fetch of the live part in flight, one queued."""

    def __init__(self, session, path: str, out: dict):
        self.session, self.path, self.out = session, path, out
        self.busy = self.again = False
        self.task = None

    def __call__(self) -> None:
        import asyncio

        if self.busy:
            self.again = True
            return
        self.busy = True
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await _load(self.session, "cockpit live part", self.path, self.out, htmx=True)
            if not self.again:
                break
            self.again = False
        self.busy = False

    async def drain(self) -> None:
        if self.task is not None:
            await self.task


async def _read(ws, out: dict, refresh, end: float) -> None:
    import aiohttp

    last_at = None
    async for msg in ws:
        arrived = time.time()
        if msg.type != aiohttp.WSMsgType.TEXT:
            break
        out["messages"] += 1
        payload = json.loads(msg.data)
        kind = payload.get("type")
        if kind in ("point", "node") and payload.get("ts"):
            out["delays"].append(("telemetry", arrived - payload["ts"]))
        elif kind == "release":
            at = (payload.get("last_analysis") or {}).get("at")
            if at and at != last_at:
                out["delays"].append(("release", arrived - at))
                last_at = at
            if refresh is not None and time.monotonic() < end:
                refresh()
    if time.monotonic() < end - 0.5 and ws.close_code not in (1000, None):
        out["ws_errors"].append(f"closed early with {ws.close_code}")


# ---------------------------------------------------------------- the world


def _world(fleet, work: Path, port: int, users: int, password: str):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import Group

    from deployments.services import cluster_create, node_create
    from models_registry.services import team_create
    from tests.releases.test_release_flow import _model_with_baseline

    User = get_user_model()  # noqa: N806
    admin = User.objects.create(username="bench-admin", is_superuser=True)
    team_create(name="fraud", actor=admin)
    router = {"driver": "nginx", "listen": f"127.0.0.1:{port}", "prefix_dir": f"{work}/router"}
    cluster = cluster_create(
        actor=admin,
        name=CLUSTER,
        environment="production",
        router=router,
        api_key=fleet.node_key.value,
    )
    for node in fleet.nodes:
        node_create(
            cluster=cluster,
            actor=admin,
            name=node.name,
            http_url=node.http_url,
            grpc_url=node.grpc_url,
            metrics_url=node.metrics_url,
        )
    world = {"cluster": cluster, "ada": admin, "rita": admin}
    sla = {"p99_latency_ms": 500, "min_success_rate": 99.0}
    _, _, candidate = _model_with_baseline(world, MODEL, 2, sla)
    # One hash for every user (the same password): setting up pays one Argon2id hash, each
    # sign-in its own check.
    hashed = make_password(password)
    roles = ["release-managers", "managers"]
    made = User.objects.bulk_create(
        User(username=f"user{i:02d}", password=hashed) for i in range(1, users + 1)
    )
    out = []
    for i, user in enumerate(made):
        role = roles[i % 2]
        Group.objects.get(name=role).user_set.add(user)
        out.append({"username": user.username, "role": role})
    return world, candidate, out


# ---------------------------------------------------------------- report


def _pct(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(values, q)) if values else float("nan")


def _report(result: dict, users: int, extra: dict) -> None:
    signins = result["signins"]
    failed = [s for s in signins if not s[0]]
    times = [s[1] * 1000 for s in signins if s[0]]
    print(
        f"sign-ins: {len(signins) - len(failed)} of {users} ok, errors {len(failed)} (goal 0); "
        f"time p50 {_pct(times, 50):.0f} ms, p95 {_pct(times, 95):.0f} ms, "
        f"max {max(times, default=float('nan')):.0f} ms (all {users} at once)"
    )
    for _, _, why in failed[:5]:
        print(f"  sign-in error: {why}")
    pages = result["pages"]
    errors = [p for p in pages if not p[1]]
    print(f"page loads: {len(pages)}, errors {len(errors)} (goal 0)")
    for name, _, _, status, _ in errors[:5]:
        print(f"  page error: {name}: {status}")
    names = list(dict.fromkeys(p[0] for p in pages))
    for name in [*names, "all pages"]:
        ms = [p[2] * 1000 for p in pages if p[1] and (name == "all pages" or p[0] == name)]
        size = [p[4] for p in pages if p[0] == name]
        kb = f", {sum(size) / len(size) / 1024:.0f} KiB" if size else ""
        print(
            f"  {name}: n {len(ms)}, p50 {_pct(ms, 50):.0f} ms, p95 {_pct(ms, 95):.0f} ms, "
            f"max {max(ms, default=float('nan')):.0f} ms{kb}"
        )
    page_ms = [p[2] * 1000 for p in pages if p[1] and p[0] != "cockpit live part"]
    print(
        f"page p50 {_pct(page_ms, 50):.0f} ms, p95 {_pct(page_ms, 95):.0f} ms (goal <= 500 ms; "
        "the four pages, without the cockpit's live part)"
    )
    print(f"websocket messages {result['messages']}, websocket errors {len(result['ws_errors'])}")
    for why in result["ws_errors"][:5]:
        print(f"  websocket error: {why}")
    for kind in ("telemetry", "release", None):
        d = [s * 1000 for k, s in result["delays"] if kind is None or k == kind]
        print(
            f"live-point delay ({kind or 'all'}): n {len(d)}, p50 {_pct(d, 50):.0f} ms, "
            f"p95 {_pct(d, 95):.0f} ms, max {max(d, default=float('nan')):.0f} ms"
            + (" (goal p95 <= 1500 ms)" if kind is None else "")
        )
    print(f"the users' client process: {result['client_cpu_s']:.1f} s CPU")
    for line in extra["lines"]:
        print(line)


# ---------------------------------------------------------------- main


def main(users: int, seconds: float, rounds: int) -> None:
    if _redis().dbsize():
        raise SystemExit(f"Redis database {REDIS_DB} is not empty: is another run going on?")
    work = Path(tempfile.mkdtemp(prefix="bench-dash-"))
    _environment(work)
    _database("create")
    procs: dict[str, subprocess.Popen] = {}
    router = None
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        # Production serves hashed, compressed files from STATIC_ROOT (staticfiles/, ignored
        # by git), as the image collects them at build.
        call_command("collectstatic", interactive=False, verbosity=0)
        from bench.release_flow import TimedTraffic
        from controlplane.celery import app
        from integrations.triton.local import free_ports, start_cluster
        from releases import routing
        from releases.models import Release
        from releases.services import release_create

        with start_cluster(2, work, node_key=bench_node_key()) as fleet:
            router_port, web_port = free_ports(2)
            password = secrets.token_urlsafe(16)
            world, candidate, accounts = _world(fleet, work, router_port, users, password)
            router = routing.router_for(world["cluster"])
            procs = _control_plane(work, web_port)
            base = f"http://127.0.0.1:{web_port}"
            wait_until(lambda: _answers(f"{base}/login/"), 60, "daphne")
            host = f"bench-dash-releases-{os.getpid()}@localhost"
            wait_until(lambda: app.control.ping(destination=[host], timeout=0.5), 90, "worker")
            connection.close()
            with TimedTraffic(router_port, MODEL, rate=TRAFFIC_RATE) as traffic:
                time.sleep(3)  # the collector and the router see steady traffic first
                release = release_create(
                    cluster=world["cluster"],
                    candidate=candidate,
                    actor=world["rita"],
                    steps=[10, 25, 50, 100],
                    step_interval_s=max(5.0, (rounds * (seconds + 40)) / 4),
                    analysis={"min_requests": 20},
                    drain_s=1,
                    progress_deadline_s=120,
                )
                row = Release.objects.filter(pk=release.pk)
                wait_until(lambda: row.get().phase != "PENDING", 60, "the first tick", step=0.5)
                config = {
                    "base": base,
                    "seconds": seconds,
                    "users": accounts,
                    "password": password,
                    "release": release.pk,
                }
                for n in range(1, rounds + 1):
                    print(f"--- round {n} of {rounds}", flush=True)
                    _round(config, procs, fleet, row)
                    connection.close()
            # The traffic's counts come back from its process when it stops.
            print(
                f"inference traffic through the router over the run: ok {traffic.ok}, "
                f"failed {traffic.failed}, retried {traffic.retries}",
                flush=True,
            )
            for proc in procs.values():
                _stop(proc)
            procs = {}
            router.stop()
            router = None
    finally:
        for proc in procs.values():
            _stop(proc)
        if os.environ.get("BENCH_LOGS"):  # the processes' last log lines, to debug a run
            for log in sorted((work / "logs").glob("*.log")):
                print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        if router is not None:
            router.stop()
        from django.db import connections

        connections.close_all()
        _database("drop")
        _redis().flushdb()
        shutil.rmtree(work, ignore_errors=True)


def _round(config: dict, procs: dict, fleet, row) -> None:
    """One round of the users in a process of their own; prints its report and the pools."""
    import multiprocessing

    load_before, cpu_before = os.getloadavg(), _cpu(procs, fleet)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    client = ctx.Process(target=_users_process, args=(child, config))
    window = time.monotonic()
    client.start()
    if not parent.poll(config["seconds"] + 180):
        client.kill()
        raise SystemExit("the users did not finish")
    result = parent.recv()
    client.join(30)
    took = time.monotonic() - window
    load_after, cpu_after = os.getloadavg(), _cpu(procs, fleet)
    release = row.get()
    lines = [
        f"release: {release.phase} at step {release.step_index} "
        f"(weight {release.candidate_weight:g}%) after the window",
        f"load average 1 min before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        f"(cores here: {os.cpu_count()})",
        f"CPU seconds over the {took:.0f} s window: "
        + ", ".join(f"{k} {cpu_after[k] - cpu_before[k]:.1f}" for k in cpu_after),
        *_pool_lines(config["base"]),
    ]
    _report(result, len(config["users"]), {"lines": lines})


def _pool_lines(base: str) -> list[str]:
    """Each web process's pool from /metrics, once every connection is back (or after 30 s)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    deadline, pools = time.monotonic() + 30, {}
    while True:
        with urllib.request.urlopen(f"{base}/metrics", timeout=30) as answer:  # noqa: S310
            text = answer.read().decode()
        pools = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith("switchyard_db_pool_"):
                    name = sample.name.removeprefix("switchyard_db_pool_")
                    pools.setdefault(sample.labels["process"], {})[name] = sample.value
        out = sum(p.get("checked_out", 0) for p in pools.values())
        if out == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    return [
        f"pool of web process {name} after the users left: checked out "
        f"{p.get('checked_out', 0):.0f} of {p.get('max_connections', 0):.0f}, open "
        f"{p.get('connections', 0):.0f}, waits {p.get('waits_total', 0):.0f} "
        f"({p.get('wait_seconds_total', 0):.1f} s), timeouts {p.get('timeouts_total', 0):.0f}"
        for name, p in sorted(pools.items())
    ]


def _cpu(procs: dict, fleet) -> dict[str, float]:
    out = {name: cpu_seconds([p.pid]) for name, p in procs.items()}
    out["triton"] = cpu_seconds([n.process.pid for n in fleet.nodes])
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    main(args.users, args.seconds, args.rounds)
