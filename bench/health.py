"""Deep health on a real Triton node with 40 serving model versions behind a real nginx.

Prints, measured in this one run:
1. the cost of one health pass of the node (probe every version, read the traffic windows,
   judge, sync alerts), every round and the median: control-plane CPU ms (this process),
   the node's CPU ms (tritonserver and its python stubs, from /proc) and the requests the
   pass added to the node;
2. detection time, every run and the median: from the moment a version starts answering
   every request with an error (steady client traffic through the router) to its
   `silent_failure` alert row, with passes every BENCH_INTERVAL_S as the beat runs them at
   any phase of the fault (goal: at most one probe interval + 5 s).
Usage: .venv/bin/python bench/health.py [rounds]
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = 40
INTERVAL_S = float(os.environ.get("BENCH_INTERVAL_S", 10.0))
DETECT_RUNS = int(os.environ.get("BENCH_DETECT_RUNS", 3))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
from bench.common import bench_node_key, drop_queued_tasks, use_bench_queue  # noqa: E402

use_bench_queue()
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchyard_bench")


def _cpu_ticks(pid: int) -> int:
    """utime + stime of `pid` and its children (the python stubs), in clock ticks."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total


def _world(fleet, work: str, port: int):
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from deployments.reconcile import cluster_reconcile
    from deployments.services import cluster_create, node_create, serving_state_set
    from models_registry.services import model_create, team_create
    from tests.health.models import FLAGGED, register_python

    user = get_user_model().objects.create(username="bench", is_superuser=True)
    team_create(name="bench", actor=user)
    router = {"driver": "nginx", "listen": f"127.0.0.1:{port}", "prefix_dir": f"{work}/router"}
    cluster = cluster_create(
        actor=user,
        name="bench",
        environment="production",
        router=router,
        api_key=fleet.node_key.value,
    )
    node = fleet.nodes[0]
    node_create(
        cluster=cluster,
        actor=user,
        name=node.name,
        http_url=node.http_url,
        grpc_url=node.grpc_url,
        metrics_url=node.metrics_url,
    )
    flag = Path(work) / "broken"
    for i in range(VERSIONS):
        model = model_create(
            name=f"m{i:02d}", team="bench", actor=user, sla={"min_success_rate": 99}
        )
        source = FLAGGED.format(flag=str(flag if i == 0 else Path(work) / "never"))
        with transaction.atomic():
            serving_state_set(
                cluster=cluster, model=model, versions=[register_python(model, user, source)]
            )
    cluster_reconcile(cluster=cluster)
    return cluster, flag


def _costs(cluster, pid: int, rounds: int) -> None:
    from health.watch import cluster_health_pass

    ticks = os.sysconf("SC_CLK_TCK")
    rows = []
    for i in range(rounds):
        time.sleep(1.0)
        node_before, cpu_before = _cpu_ticks(pid), time.process_time()
        report = cluster_health_pass(cluster=cluster)
        cp_ms = (time.process_time() - cpu_before) * 1000
        node_ms = (_cpu_ticks(pid) - node_before) * 1000 / ticks
        rows.append((cp_ms, node_ms, report.requests, report.probes, report.seconds or 0))
        print(
            f"  pass {i + 1}: control plane {cp_ms:.0f} CPU ms, node {node_ms:.0f} CPU ms, "
            f"{report.requests} requests, {report.probes} versions probed"
        )
    print(
        f"one pass of 1 node x {VERSIONS} versions, median of {rounds}: control plane "
        f"{statistics.median(r[0] for r in rows):.0f} CPU ms, node "
        f"{statistics.median(r[1] for r in rows):.0f} CPU ms, "
        f"{statistics.median(r[2] for r in rows):.0f} requests added "
        f"(per {INTERVAL_S:g} s interval; default interval 30 s)"
    )


def _detect_once(cluster, flag: Path, phase_s: float) -> float:
    from health.models import Alert
    from health.watch import cluster_health_pass

    next_pass = time.time() + phase_s
    flag.touch()
    onset = time.time()
    try:
        while True:
            time.sleep(max(0.0, next_pass - time.time()))
            next_pass += INTERVAL_S
            cluster_health_pass(cluster=cluster)
            alert = Alert.objects.filter(kind="silent_failure", state="firing").first()
            if alert is not None:
                return alert.started_at.timestamp() - onset
    finally:
        flag.unlink()
        while Alert.objects.filter(kind="silent_failure", state="firing").exists():
            time.sleep(INTERVAL_S)
            cluster_health_pass(cluster=cluster)


def _detection(cluster, flag: Path, port: int) -> None:
    from django.conf import settings

    from tests.releases.test_release_flow import Traffic

    settings.SWITCHYARD_HEALTH_WINDOW_S = INTERVAL_S
    settings.SWITCHYARD_HEALTH_MIN_REQUESTS = 20
    times = []
    with Traffic(port, "m00", clients=2):
        time.sleep(INTERVAL_S)
        for i in range(DETECT_RUNS):
            # The fault starts at a different point of the pass cadence each run.
            times.append(
                _detect_once(cluster, flag, phase_s=INTERVAL_S * (i + 1) / (DETECT_RUNS + 1))
            )
            print(f"  run {i + 1}: fault to alert row {times[-1]:.2f} s")
    print(
        f"fault to silent_failure alert, median of {len(times)}: {statistics.median(times):.2f} s "
        f"(goal <= {INTERVAL_S + 5:g} s: one probe interval of {INTERVAL_S:g} s + 5 s)"
    )


def main(rounds: int) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    from integrations.triton.local import free_ports, start_cluster
    from integrations.triton.memory import local_server_pid
    from releases import routing

    work = tempfile.mkdtemp()
    try:
        with start_cluster(1, Path(work), node_key=bench_node_key()) as fleet:
            settings.SWITCHYARD_STORAGE_ROOT = Path(work) / "artifacts"
            settings.SWITCHYARD_REPOSITORY_ROOTS = settings.SWITCHYARD_ROUTER_ROOTS = [work]
            (port,) = free_ports(1)
            cluster, flag = _world(fleet, work, port)
            router = routing.router_for(cluster)
            router.apply(routing.router_state(cluster, []))
            try:
                _costs(cluster, local_server_pid(fleet.nodes[0].http_url), rounds)
                _detection(cluster, flag, port)
            finally:
                router.stop()
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)
        drop_queued_tasks()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
