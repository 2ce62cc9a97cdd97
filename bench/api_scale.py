"""The REST API with real history: 10,000 versions and 100,000 release events (issue #27).

A throwaway database (`switchyard_bench_api`, created here, dropped at the end; cache keys
of its own prefix in Redis database 15, deleted at the end), filled with bulk_create and
COPY: 500 models in 10 teams with 20 versions each (10,000) and a `production` alias, 20
clusters of 3 nodes, 5,000 releases with 20 events each (100,000), 2,000 deployments,
2,000 benchmark runs, 500 alerts, and a year of cost rollups (a day row per model, node and
cluster sum for 365 days, the cluster sums' months as the hourly rollup derives them, hour
rows for the last 2 days, the nodes' idle time).

The web is served as production serves it: the web command (controlplane/web_server.py: one
daphne process per core on controlplane.asgi:application) with controlplane.settings.prod and
a pool of 10 connections per process (deploy/containers/switchyard.sh's web kind; set
SWITCHYARD_WEB_PROCESSES to try another count), the settings module swapped only for
bench/api_scale_settings.py, which adds
bare DRF list views of the models and versions tables (bench/api_scale_urls.py) served by
that same server.

Then 10 clients, each with one keep-alive connection and an API token, request the main
read endpoints in turn for 60 s (the bare views among them, so both see the same load).
Prints per endpoint: requests, errors, p50 and p99 in ms and p99 against the bare view of
the same kind; the requests per second of all; the web's CPU (all of it and each
process's: one near 0 means the connections sat on the others) and the clients' own (they
run on the same cores); the schema's time apart (one client, after the load: it is large).

Goals (2 cores): p99 <= 100 ms per endpoint, >= 300 req/s, and the product's lists within
1.5x the bare view's p99.

Usage: .venv/bin/python bench/api_scale.py [--clients 10] [--seconds 60] [--only 'bare:']
(--only: only the endpoints whose label contains it, e.g. the bare views alone: the most
this server and machine serve of a plain DRF page).
"""

import argparse
import http.client
import os
import random
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB_NAME = "switchyard_bench_api"
REDIS_DB = 15  # its cache keys carry the bench's own prefix and are deleted at the end
QUEUE = "switchyard-bench-api"
CACHE_PREFIX = "switchyard-bench-api"
MODELS, VERSIONS_PER_MODEL, TEAMS = 500, 20, 10
CLUSTERS, NODES_PER_CLUSTER = 20, 3
RELEASES, EVENTS_PER_RELEASE = 5_000, 20
DEPLOYMENTS, BENCHMARKS, ALERTS = 2_000, 2_000, 500
DAYS, HOURS = 365, 48
WEB_POOL = "10"
sys.path.insert(0, str(ROOT))
from bench.common import (  # noqa: E402
    DB_SERVER,
    child_pids,
    cpu_seconds,
    throwaway_database,
    wait_until,
)


def _environment(work: Path) -> None:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="controlplane.settings.dev",
        DATABASE_URL=f"{DB_SERVER}/{DB_NAME}",
        REDIS_URL=f"redis://127.0.0.1:6379/{REDIS_DB}",
        SWITCHYARD_CELERY_QUEUE=QUEUE,
        SWITCHYARD_VAR_DIR=str(work / "var"),
        SWITCHYARD_STORAGE_ROOT=str(work / "artifacts"),
        SWITCHYARD_CACHE_KEY_PREFIX=CACHE_PREFIX,
        PYTHONUNBUFFERED="1",
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("CELERY_RESULT_BACKEND", None)


def _database(action: str) -> None:
    throwaway_database(DB_NAME, action)


def _copy(model, columns: list[str], rows) -> int:
    """COPY rows (tuples in `columns` order) into `model`'s table; how many."""
    from django.db import connection

    count = 0
    table = model._meta.db_table
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own cursor: COPY FROM STDIN
        with raw.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


# ---------------------------------------------------------------- the history


def _registry(user, now):
    from models_registry.models import Alias, Model, ModelVersion, Team

    config = (ROOT / "examples/model_repository/risk_score/config.pbtxt").read_text()
    teams = Team.objects.bulk_create([Team(name=f"team_{i:02d}") for i in range(TEAMS)])
    models = Model.objects.bulk_create(
        Model(
            name=f"model_{i:04d}",
            team=teams[i % TEAMS],
            description=f"Model {i} of the bench's fleet",
            tags=[f"tag{i % 7}", f"area{i % 3}"],
            sla_p99_latency_ms=50.0,
            next_version=VERSIONS_PER_MODEL + 1,
            created_by=user,
        )
        for i in range(MODELS)
    )
    versions = ModelVersion.objects.bulk_create(
        (
            ModelVersion(
                model=m,
                version=v,
                label=f"v{v}",
                status="smoke_passed",
                config_text=config.replace("risk_score", m.name),
                config_json={"name": m.name, "backend": "python"},
                manifest={"files": [{"path": f"{v}/model.py", "size": 1234}]},
                digest=secrets.token_hex(32),
                size_bytes=1234,
                validation={"errors": [], "warnings": []},
                created_by=user,
            )
            for m in models
            for v in range(1, VERSIONS_PER_MODEL + 1)
        ),
        batch_size=2000,
    )
    by_model = {}
    for version in versions:
        by_model.setdefault(version.model_id, []).append(version)
    Alias.objects.bulk_create(
        Alias(model=m, name="production", version=by_model[m.pk][-1]) for m in models
    )
    return models, by_model


def _fleet():
    from deployments.models import TritonCluster, TritonNode

    clusters = TritonCluster.objects.bulk_create(
        TritonCluster(
            name=f"cluster-{i:02d}",
            environment="production" if i % 2 else "staging",
            node_hourly_cost="2.5000",
        )
        for i in range(CLUSTERS)
    )
    TritonNode.objects.bulk_create(
        TritonNode(
            cluster=c,
            name=f"node-{n}",
            http_url=f"http://10.20.{i}.{n + 1}:8000",
            health="up",
            server_version="2.61.0",
        )
        for i, c in enumerate(clusters)
        for n in range(NODES_PER_CLUSTER)
    )
    return clusters


def _releases(user, models, by_model, clusters, now) -> None:
    from releases.models import Release, ReleaseEvent

    ended = ["SUCCEEDED", "ROLLED_BACK", "SUCCEEDED", "FAILED"]
    rounds = RELEASES // MODELS  # each model's releases, oldest first; a tenth runs its last

    def phase(i: int) -> str:
        is_last = i // MODELS == rounds - 1
        return "PROGRESSING" if is_last and i % 10 == 0 else ended[(i // MODELS + i) % 4]

    releases = Release.objects.bulk_create(
        (
            Release(
                cluster=clusters[i % CLUSTERS],
                model=models[i % MODELS],
                baseline=by_model[models[i % MODELS].pk][(i // MODELS) % 19],
                candidate=by_model[models[i % MODELS].pk][(i // MODELS) % 19 + 1],
                steps=[5, 25, 50, 100],
                phase=phase(i),
                created_by=user,
            )
            for i in range(RELEASES)
        ),
        batch_size=2000,
    )
    start = now - timedelta(days=DAYS)
    columns = ["release_id", "kind", "phase", "message", "data", "actor", "created_at"]
    _copy(
        ReleaseEvent,
        columns,
        (
            (
                r.pk,
                "step" if e else "created",
                r.phase,
                f"step {e}: weight moved",
                f'{{"weight": {e * 5}}}',
                "",
                start + timedelta(minutes=(i * 97 + e) % (DAYS * 1440)),
            )
            for i, r in enumerate(releases)
            for e in range(EVENTS_PER_RELEASE)
        ),
    )


def _work_rows(user, models, by_model, clusters) -> None:
    from benchmarks.models import BenchmarkRun
    from deployments.models import Deployment
    from health.models import Alert

    def version(i):
        return by_model[models[i % MODELS].pk][-1]

    Deployment.objects.bulk_create(
        Deployment(
            cluster=clusters[i % CLUSTERS],
            model=models[i % MODELS],
            version=version(i),
            status="succeeded" if i % 9 else "failed",
            target_versions=[version(i).version],
            requested_by=user,
        )
        for i in range(DEPLOYMENTS)
    )
    BenchmarkRun.objects.bulk_create(
        BenchmarkRun(version=version(i), cluster=clusters[i % CLUSTERS], status="succeeded")
        for i in range(BENCHMARKS)
    )
    Alert.objects.bulk_create(
        Alert(
            kind="silent_failure",
            key=f"bench:{i}",
            severity="critical" if i % 4 == 0 else "warning",
            state="firing" if i % 3 else "resolved",
            cluster=clusters[i % CLUSTERS],
            cluster_name=clusters[i % CLUSTERS].name,
            node_name="node-0",
            model_name=models[i % MODELS].name,
            version=VERSIONS_PER_MODEL,
            summary=f"{models[i % MODELS].name}: requests failed at the router",
        )
        for i in range(ALERTS)
    )


def _cost_rows(models, clusters, now):
    """A year of day rows and two days of hour rows, per model on its cluster's first node,
    the cluster sums of each, and every node's idle time per day."""
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    hour = now.replace(minute=0, second=0, microsecond=0)
    for i, model in enumerate(models):
        cluster = clusters[i % CLUSTERS].pk
        for day in range(1, DAYS + 1):
            start = today - timedelta(days=day)
            for node, period in (("node-0", "day"), ("", "dc")):
                yield (cluster, node, period, start, "model", model.name, str(VERSIONS_PER_MODEL),
                       "serving", 3_600_000 + i, 0, 8640, 8600, 4.3e9, 1440)  # fmt: skip
        for back in range(1, HOURS + 1):
            start = hour - timedelta(hours=back)
            for node, period in (("node-0", "hour"), ("", "hc")):
                yield (cluster, node, period, start, "model", model.name, str(VERSIONS_PER_MODEL),
                       "serving", 150_000 + i, 0, 360, 358, 1.8e8, 60)  # fmt: skip
    for cluster in clusters:
        for n in range(NODES_PER_CLUSTER):
            for day in range(1, DAYS + 1):
                yield (cluster.pk, f"node-{n}", "day", today - timedelta(days=day), "idle", "", "",
                       "", 1_000_000, 0, 0, 0, 0.0, 1440)  # fmt: skip


def seed() -> dict:
    """Fill the database; the names the load asks for and the API token."""
    from django.contrib.auth import get_user_model

    from accounts.services import api_token_create
    from reports.models import CostRollup, CostWatermark

    now = datetime.now(UTC)
    user = get_user_model().objects.create_superuser("bench", password=None)
    _, token = api_token_create(user=user, name="bench")
    models, by_model = _registry(user, now)
    clusters = _fleet()
    _releases(user, models, by_model, clusters, now)
    _work_rows(user, models, by_model, clusters)
    columns = ["cluster_id", "node_name", "period", "start", "kind", "model_name", "version"]
    columns += ["cost_kind", "cost_ticks", "idle_share_ticks", "requests", "successes"]
    columns += ["compute_us", "minutes"]
    rollups = _copy(CostRollup, columns, _cost_rows(models, clusters, now))
    # The month rows, as the hourly rollup derives them from the day rows it writes.
    from reports.services import derive, floor_month, next_month

    derive("mc", floor_month(now - timedelta(days=DAYS + 1)), next_month(now))
    rollups += CostRollup.objects.filter(period="mc").count()
    # Every complete hour is rolled up: reports read these rows, not minutes (none here).
    CostWatermark.objects.create(
        name="hourly", until=now.replace(minute=0, second=0, microsecond=0)
    )
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    from releases.models import Release

    release = Release.objects.order_by("id").values_list("id", flat=True)[RELEASES // 2]
    return {"token": token, "release": release, "rollups": rollups, "now": now}


# ---------------------------------------------------------------- the load


def endpoints(names: dict, only: str = "") -> list[tuple[str, str]]:
    """(label, path) of the endpoints loaded: all, or those whose label contains `only`."""
    return [(label, path) for label, path in _endpoints(names) if only in label]


def _endpoints(names: dict) -> list[tuple[str, str]]:
    now = names["now"]
    month = (now - timedelta(days=30)).date().isoformat()
    year = (now - timedelta(days=365)).date().isoformat()
    today = now.date().isoformat()
    return [
        ("models", "/api/v1/models/?limit=100"),
        ("models ?search", "/api/v1/models/?search=model_04"),
        ("models ?team&tag", "/api/v1/models/?team=team_03&tag=tag3"),
        ("model", "/api/v1/models/model_0123/"),
        ("versions of a model", "/api/v1/models/model_0123/versions/"),
        ("releases", "/api/v1/releases/?limit=100"),
        ("releases ?model&state", "/api/v1/releases/?model=model_0042&state=succeeded"),
        ("release (20 events)", f"/api/v1/releases/{names['release']}/"),
        ("deployments", "/api/v1/deployments/?limit=100"),
        ("deployments ?cluster", "/api/v1/deployments/?cluster=cluster-07&state=failed"),
        ("benchmarks", "/api/v1/benchmarks/?limit=100"),
        ("alerts ?state", "/api/v1/alerts/?state=firing&limit=100"),
        ("clusters", "/api/v1/clusters/"),
        ("cost, 30 days by model", f"/api/v1/reports/cost/?from={month}&to={today}&group_by=model"),
        ("cost, a year by team", f"/api/v1/reports/cost/?from={year}&to={today}&group_by=team"),
        ("bare: models", "/bench/bare/models/?limit=100"),
        ("bare: versions", "/bench/bare/versions/?limit=100"),
    ]


BARE_OF = {"models": "bare: models", "models ?search": "bare: models",
           "models ?team&tag": "bare: models", "versions of a model": "bare: versions"}  # fmt: skip


def _client(port, token, paths, until, results, errors, offset) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Token {token}", "Host": "127.0.0.1"}
    i = offset
    while time.monotonic() < until:
        name, path = paths[i % len(paths)]
        i += 1
        started = time.perf_counter()
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        took = time.perf_counter() - started
        (results if ok else errors).setdefault(name, []).append(took)
    conn.close()


def load(port: int, names: dict, clients: int, seconds: float, only: str = "") -> dict:
    paths = endpoints(names, only)
    for name, path in paths:  # warm: the first request of each imports and compiles
        _get(port, names["token"], path, expect=200, what=name)
    results, errors = {}, {}
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=_client,
            args=(port, names["token"], paths, until, results, errors, k * 3),
        )
        for k in range(clients)
    ]
    random.seed(27)
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"results": results, "errors": errors, "elapsed": time.monotonic() - started}


def _get(port: int, token: str, path: str, *, expect: int, what: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    conn.request("GET", path, headers={"Authorization": f"Token {token}"})
    response = conn.getresponse()
    body = response.read()
    took = time.perf_counter() - started
    conn.close()
    if response.status != expect:
        raise RuntimeError(f"{what}: {path} answered {response.status}: {body[:300]!r}")
    return took


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def report(run: dict, names: dict, web_cpu_s: float, client_cpu_s: float, schema: list,
           only: str = "") -> None:  # fmt: skip
    results, errors, elapsed = run["results"], run["errors"], run["elapsed"]
    total = sum(len(v) for v in results.values())
    p99 = {name: _pct(v, 0.99) for name, v in results.items()}
    print(f"\n{'endpoint':<26}{'requests':>9}{'errors':>7}{'p50 ms':>9}{'p99 ms':>9}{'x bare':>8}")
    for name, _ in endpoints(names, only):
        got = results.get(name, [])
        bare = BARE_OF.get(name)
        ratio = f"{p99[name] / p99[bare]:.2f}" if bare and got and bare in p99 else ""
        p50 = f"{_pct(got, 0.5):.1f}" if got else "-"
        p99s = f"{p99[name]:.1f}" if got else "-"
        print(f"{name:<26}{len(got):>9}{len(errors.get(name, [])):>7}{p50:>9}{p99s:>9}{ratio:>8}")
    rate = total / elapsed
    worst = max(p99.values())
    print(f"\n{total} requests in {elapsed:.1f} s: {rate:.0f} req/s (goal >= 300)")
    print(f"worst p99 {worst:.1f} ms (goal <= 100); errors {sum(map(len, errors.values()))}")
    print(f"web CPU {web_cpu_s:.1f} s ({web_cpu_s / elapsed:.2f} cores); clients' CPU "
          f"{client_cpu_s:.1f} s ({client_cpu_s / elapsed:.2f} cores); load average "
          f"{os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")  # fmt: skip
    print(f"schema (/api/schema/, one client, {len(schema)} requests): "
          f"p50 {_pct(schema, 0.5):.0f} ms, max {max(schema) * 1000:.0f} ms")  # fmt: skip


def _web(work: Path, port: int) -> subprocess.Popen:
    """The production web command (deploy/containers/switchyard.sh's web kind): one daphne
    process per core unless SWITCHYARD_WEB_PROCESSES says otherwise."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.api_scale_settings",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(48),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "SWITCHYARD_DATABASE_POOL_SIZE": WEB_POOL,
        "SWITCHYARD_LOG_LEVEL": "WARNING",
    }
    args = [sys.executable, "-m", "controlplane.web_server", "-b", "127.0.0.1", "-p", str(port)]
    log = open(work / "web.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        args,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
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


def _measured_load(web_pid: int, port: int, names: dict, args) -> tuple:
    """The load, with the CPU the web used (all of it, and per daphne process: one near 0
    means the clients' connections sat on the others) and the clients' own."""
    web_before, client_before = cpu_seconds([web_pid]), resource.getrusage(resource.RUSAGE_SELF)
    each_before = {pid: cpu_seconds([pid]) for pid in child_pids(web_pid)}
    run = load(port, names, args.clients, args.seconds, args.only)
    web_cpu = cpu_seconds([web_pid]) - web_before
    each = [cpu_seconds([pid]) - before for pid, before in sorted(each_before.items())]
    after = resource.getrusage(resource.RUSAGE_SELF)
    client_cpu = (after.ru_utime - client_before.ru_utime) + (
        after.ru_stime - client_before.ru_stime
    )
    return run, web_cpu, client_cpu, each


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int, token: str) -> bool:
    try:
        _get(port, token, "/api/v1/clusters/", expect=200, what="the web")
    except OSError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--only", default="", help="load only the endpoints whose label contains this ('bare:')"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="switchyard-bench-api-"))
    _environment(work)
    _database("create")
    web = None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        started = time.monotonic()
        call_command("migrate", verbosity=0)
        names = seed()
        print(f"seeded in {time.monotonic() - started:.0f} s: {MODELS} models, "
              f"{MODELS * VERSIONS_PER_MODEL} versions, {CLUSTERS} clusters, {RELEASES} "
              f"releases, {RELEASES * EVENTS_PER_RELEASE} release events, "
              f"{names['rollups']} cost rollups over {DAYS} days")  # fmt: skip
        from django.db import connections

        connections.close_all()
        port = _free_port()
        web = _web(work, port)
        wait_until(lambda: _answers(port, names["token"]), 120, "the web to answer")
        run, web_cpu, client_cpu, each = _measured_load(web.pid, port, names, args)
        schema = [
            _get(port, names["token"], "/api/schema/", expect=200, what="schema") for _ in range(5)
        ]
        report(run, names, web_cpu, client_cpu, schema, args.only)
        print("web CPU per process: " + ", ".join(f"{seconds:.1f} s" for seconds in each))
    finally:
        if web is not None:
            _stop(web)
            tail = (work / "web.log").read_text(errors="replace")[-2000:]
            if "Traceback" in tail:
                print("web log tail:\n" + tail)
        from django.db import connections

        connections.close_all()
        _database("drop")
        import redis

        client = redis.Redis.from_url(f"redis://127.0.0.1:6379/{REDIS_DB}")
        for key in client.scan_iter(match=f"{CACHE_PREFIX}*", count=1000):
            client.delete(key)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
