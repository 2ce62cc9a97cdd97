"""`make demo` for real: the launcher `make demo` runs (`manage.py demo_run`) with every
process, on free ports, a database and Redis keys of its own. The terminal stays quiet
(under 60 lines, the banner last), each process logs to its file, and Ctrl-C (SIGINT) leaves
no process behind. Within minutes its ghost is listed, with probes and no client request."""

import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db.models import Sum

from demo.ghost import GHOST_MODEL
from demo.management.commands import demo_run
from demo.users import BANNER_RULE
from deployments.models import Deployment
from integrations.triton.local import port_is_free
from models_registry.models import ModelVersion
from plans.models import ReleasePlan
from reports.selectors import ghosts
from telemetry.models import Rollup
from tests.conftest import ROOT, child_environment, drop_prefixed, drop_queues, wait_for

PROCESSES = (
    "triton",
    "web",
    "worker-releases",
    "worker",
    "worker-long",
    "beat",
    "collector",
    "router",
    "traffic",
    "router-eu",
    "router-us",
    "traffic-eu",
    "traffic-us",
)


def _demo_ports() -> tuple[int, int]:
    """A web port and a Triton base port whose nodes (3 ports each: base..), routers (+80 HTTP,
    +81 gRPC, then one a fleet cluster) and web (+90) are free, below the kernel's ephemeral
    range (from 32768), where no outgoing connection of another process takes one meanwhile."""
    nodes = 3 * (demo_run.NODES + demo_run.SMOKE_NODES + demo_run.FLEET_NODES)
    for _ in range(200):
        base = random.randrange(20000, 32000, 100)
        port = base + 90
        routers = range(base + 80, base + 82 + demo_run.FLEET_NODES)
        if all(port_is_free(p) for p in (*range(base, base + nodes), *routers, port)):
            return port, base
    raise RuntimeError("no free ports for the demo")


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process, from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":  # a zombie has ended already
            table[int(entry.name)] = (int(fields[1]), cmdline)
    return table


def _demo_processes(root_pid: int, var_dir: Path) -> set[int]:
    """The launcher's descendants, and processes naming the demo's var folder (nginx
    daemonizes, so it is no descendant)."""
    table = _process_table()
    found = {pid for pid, (_, cmd) in table.items() if str(var_dir) in cmd}
    frontier = {root_pid}
    while frontier:
        found |= frontier
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
    return found


@pytest.mark.triton
def test_make_demo_is_quiet_logs_to_files_and_stops_everything(transactional_db, tmp_path):
    port, base = _demo_ports()
    var_dir = tmp_path / "var"
    tag = f"demo-test-{uuid.uuid4().hex[:8]}"
    env = child_environment(
        REDIS_URL=settings.REDIS_URL,
        # The SWITCHYARD_ names and the old ones they replace: whichever the settings read
        # (an old name alone would log a deprecation warning into the quiet terminal).
        SWITCHYARD_CELERY_QUEUE=tag,
        SWITCHYARD_CACHE_KEY_PREFIX=tag,
        SWITCHYARD_CHANNEL_LAYER_PREFIX=tag,
        CELERY_QUEUE=tag,
        CACHE_KEY_PREFIX=tag,
        CHANNEL_LAYER_PREFIX=tag,
        SWITCHYARD_VAR_DIR=str(var_dir),
    )
    env["DJANGO_SETTINGS_MODULE"] = "controlplane.settings.dev"  # as `make demo` runs it
    args = ["manage.py", "demo_run", "--port", str(port), "--triton-base-port", str(base)]
    launched = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    running: set[int] = set()
    try:
        try:
            wait_for(
                lambda: lines.count(BANNER_RULE) >= 2,
                timeout_s=150,
                what="the demo's banner",
                proc=proc,
            )
        except RuntimeError as exc:  # say what the demo printed and its processes logged
            logs = sorted((var_dir / "log").glob("*.log"))
            tails = [f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in logs]
            raise RuntimeError("\n".join([str(exc), *lines, *tails])) from None
        # What comes after the banner shows here (at least 45 s after the launch).
        time.sleep(max(3.0, 45 - (time.monotonic() - launched)))
        seen = list(lines)
        assert len(seen) < 60, "\n".join(seen)
        assert seen[-1] == BANNER_RULE, "\n".join(seen)  # the banner is last ...
        banner = seen[seen.index(BANNER_RULE) :]
        assert f"http://127.0.0.1:{port}/" in banner[1] and len(banner) == 10, banner
        assert [line.split()[0] for line in banner[3:7]] == ["ada", "rita", "max", "admin"]
        for expected in ("web answers", "Triton nodes answer", "worker answers", "routers answer"):
            assert any(line.startswith(expected) for line in seen), (expected, seen)
        logs = var_dir / "log"
        assert sorted(p.stem for p in logs.glob("*.log")) == sorted(PROCESSES)
        assert "Triton nodes are ready" in (logs / "triton.log").read_text()
        for worker in ("worker-releases", "worker", "worker-long"):  # one per lane
            assert "ready." in (logs / f"{worker}.log").read_text()  # celery's "... ready."
        for router in ("router", "router-eu", "router-us"):  # a router per cluster
            assert "listening on" in (logs / f"{router}.log").read_text()
        # The plan example waits for a release manager's approval of its first wave (eu).
        assert any(line.startswith("release plan example: risk_score v2") for line in seen), seen
        plan = wait_for(
            lambda: (p := ReleasePlan.objects.first()) and p.phase == "WAITING_APPROVAL" and p,
            timeout_s=60,
            what="the plan example waiting for approval",
        )
        assert [w["clusters"] for w in plan.waves] == [["eu"], ["us"], ["local"]]
        wait_for(
            lambda: "demo traffic:" in (logs / "traffic.log").read_text(),
            timeout_s=60,
            what="demo traffic",
        )

        # Its ghost is listed as the Reports page reads it, once probed: probes are no client.
        def seen_by() -> dict:
            return Rollup.objects.filter(model_name=GHOST_MODEL).aggregate(
                clients=Sum("requests"), probes=Sum("probe_requests")
            )

        wait_for(lambda: (seen_by()["probes"] or 0) > 0, timeout_s=300, what="a probe's minute")
        assert GHOST_MODEL in {row["model"] for row in ghosts(days=7)["rows"]}, ghosts(days=7)
        assert seen_by()["clients"] == 0, seen_by()
        # The support pipeline came with its steps, each deployed before it, and its smoke
        # test answered through them.
        triage = wait_for(
            lambda: (
                (d := Deployment.objects.filter(model__name="ticket_triage").first())
                and d.is_finished
                and d
            ),
            timeout_s=120,
            what="the pipeline's deployment",
        )
        assert triage.status == "succeeded", triage.error
        steps = sorted(d.model.name for d in triage.waits_for.all())
        assert steps == ["ticket_clean", "ticket_priority", "ticket_router"], steps
        smoked = wait_for(
            lambda: (
                (v := ModelVersion.objects.get(model__name="ticket_triage", version=1))
                and v.validation.get("smoke")
                and v
            ),
            timeout_s=120,
            what="the pipeline's smoke test",
        )
        assert smoked.status == "smoke_passed", smoked.validation
        # The fleet's clusters serve risk_score v1, each deployed on its own node.
        fleet = wait_for(
            lambda: (
                (ds := list(Deployment.objects.filter(cluster__name__in=["eu", "us"])))
                and all(d.is_finished for d in ds)
                and ds
            ),
            timeout_s=120,
            what="the fleet's deployments",
        )
        assert sorted((d.cluster.name, d.status) for d in fleet) == [
            ("eu", "succeeded"), ("us", "succeeded")]  # fmt: skip
        running = _demo_processes(proc.pid, var_dir)
        commands = " ".join(cmd for pid, (_, cmd) in _process_table().items() if pid in running)
        # local's 2, 1 for smoke tests, 1 each for eu and us
        nodes = demo_run.NODES + demo_run.SMOKE_NODES + demo_run.FLEET_NODES
        assert commands.count("bin/tritonserver") == nodes
        assert "nginx: master" in commands
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            reader.join(timeout=10)
            drop_queues(tag)  # the demo's lanes and their bindings, and its keys
            drop_prefixed(tag)
    assert proc.returncode == 0 and lines[-1] == "demo stopped.", lines[-5:]
    wait_for(
        lambda: not (running & set(_process_table())), timeout_s=20, what="every process stopped"
    )
    assert all(port_is_free(p) for p in (port, base, base + 3, base + 80))
