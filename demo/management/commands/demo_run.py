"""`make demo`: the whole console against a local Triton fleet, quietly: the `local` cluster
(two nodes), `eu` and `us` (one node each, demo/fleet.py), each behind its own router, and a
node of its own for smoke tests.

Checks the ports, makes one demo user per role (fresh passwords), starts every process under
the demo's supervisor (each one logging to its own file), says how start-up goes, seeds the
demo's data once the web and the nodes answer, and prints the banner last once the web, the
worker, the nodes and the router answer. Ctrl-C (or SIGTERM) stops everything.
"""

import os
import secrets
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from console.health import check_worker
from controlplane.queues import FLEET, LONG, RELEASES, lane_queue
from demo.fleet import (
    FLEET_CLUSTERS,
    FLEET_RPS,
    demo_fleet_deploy,
    demo_fleet_register,
    demo_fleet_serving,
    demo_plan_seed,
    fleet_router_port,
)
from demo.seed import demo_cluster_seed, demo_seed
from demo.supervisor import Supervisor
from demo.users import banner_lines, demo_users_create
from integrations.triton.local import port_is_free

NODES = 2
# One more node, of a cluster of its own that serves nothing: where new versions are
# smoke-tested (a version that crashes its node takes no served model down).
SMOKE_NODES = 1
# The fleet's clusters beside local, one node and one router each (demo/fleet.py).
FLEET_NODES = len(FLEET_CLUSTERS)
WEB_POOL_SIZE = os.environ.get("SWITCHYARD_DATABASE_POOL_SIZE", "10")


def demo_commands(
    *, port: int, base_port: int, var_dir: Path, key_file: Path
) -> dict[str, list[str]]:
    """The demo's processes. The control plane runs at nice 10 so that on shared cores the
    data plane (Triton, nginx, traffic) keeps its latency."""
    py, nice = sys.executable, ["nice", "-n", "10"]
    celery = [py, "-m", "celery", "-A", "controlplane"]
    return {
        "triton": [
            py,
            "manage.py",
            "triton_local",
            "--nodes",
            str(NODES + SMOKE_NODES + FLEET_NODES),
            "--base-port",
            str(base_port),
            "--key-file",
            str(key_file),
        ],
        "web": [
            "env",  # a capped connection pool: many sign-ins at once queue, never exhaust
            f"SWITCHYARD_DATABASE_POOL_SIZE={WEB_POOL_SIZE}",
            py,
            "-m",
            "controlplane.web_server",  # one daphne process per core, one port
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        **demo_workers(celery=[*nice, *celery], port=port),
        "beat": [
            *nice,
            *celery,
            "beat",
            "--loglevel=INFO",
            f"--schedule={var_dir / 'celerybeat-schedule'}",
        ],
        "collector": [*nice, py, "manage.py", "run_collector", "--interval", "1"],
        "router": _router(py, "local"),
        "traffic": _traffic(py, "local", 40),
        **{f"router-{name}": _router(py, name) for name in FLEET_CLUSTERS},
        **{f"traffic-{name}": _traffic(py, name, FLEET_RPS) for name in FLEET_CLUSTERS},
    }


def _router(py: str, cluster: str) -> list[str]:
    return [py, "manage.py", "run_router", "--cluster", cluster, "--wait", "300"]


def _traffic(py: str, cluster: str, rps: float) -> list[str]:
    return [py, "manage.py", "demo_traffic", "--cluster", cluster, "--rps", f"{rps:g}",
            "--wait", "300"]  # fmt: skip


# One worker per lane (controlplane/queues.py), so a push or a benchmark never holds the slot
# a release tick needs: process name -> (lane, worker slots).
WORKERS = {"worker-releases": (RELEASES, 2), "worker": (FLEET, 2), "worker-long": (LONG, 1)}


def demo_workers(*, celery: list[str], port: int) -> dict[str, list[str]]:
    base = settings.CELERY_TASK_DEFAULT_QUEUE
    return {
        name: [
            *celery,
            "worker",
            "--loglevel=INFO",
            f"--concurrency={slots}",
            f"--queues={lane_queue(base, lane)}",
            f"--hostname=demo-{name}-{port}@%h",
        ]
        for name, (lane, slots) in WORKERS.items()
    }


def demo_node_key_write(var_dir: Path) -> Path:
    """A new node key for this run's Triton nodes, in a file only this user reads (under
    SWITCHYARD_SECRET_FILE_ROOTS' default): the nodes start with it, the cluster refers to it."""
    folder = Path(var_dir) / "secrets"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / "demo-node-key"
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(32))
    return path


def http_status(url: str) -> int | None:
    """The HTTP status `url` answers with; None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 - loopback only
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


class _Stop(Exception):
    """Ctrl-C or SIGTERM: stop everything."""


def _raise_stop(*_):
    raise _Stop


class Command(BaseCommand):
    help = "Run the demo (DEMO ONLY: passwords are printed); Ctrl-C stops everything."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--triton-base-port", type=int, default=18000)
        parser.add_argument("--timeout", type=float, default=300.0, help="start-up limit, s")
        parser.add_argument("--log-dir", default="", help="default: $SWITCHYARD_VAR_DIR/log")

    def say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def handle(self, *args, **opts):
        port, base = opts["port"], opts["triton_base_port"]
        self._check_ports(port, base)
        logins = demo_users_create()
        key_file = demo_node_key_write(settings.SWITCHYARD_VAR_DIR)
        self.key_ref = f"file:{key_file}"
        for line in demo_cluster_seed(base_port=base, nodes=NODES, key_ref=self.key_ref):
            self.say(line)  # before the routers start
        admin = get_user_model().objects.get(username="admin")
        for line in demo_fleet_register(base_port=base, nodes=NODES, actor=admin,
                                        key_ref=self.key_ref):  # fmt: skip
            self.say(line)
        log_dir = Path(opts["log_dir"] or settings.SWITCHYARD_VAR_DIR / "log")
        commands = demo_commands(
            port=port, base_port=base, var_dir=settings.SWITCHYARD_VAR_DIR, key_file=key_file
        )
        # Webhook messages link to this console (a plan's approval page, plans/approval_links.py).
        self.console_url = os.environ.get("SWITCHYARD_CONSOLE_URL") or f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "SWITCHYARD_CONSOLE_URL": self.console_url}
        self.supervisor = Supervisor(
            commands, log_dir=log_dir, env=env, cwd=settings.BASE_DIR, say=self.say
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _raise_stop)
        try:
            self.say(f"starting {', '.join(commands)}; each logs to {log_dir}/<name>.log")
            self.supervisor.start_all()
            self._start_up(port, base, opts["timeout"])
            url = f"http://127.0.0.1:{port}/"
            self.say("\n".join(banner_lines(url=url, logins=logins, log_dir=str(log_dir))))
            while True:
                self.supervisor.check()
                time.sleep(0.5)
        except _Stop:
            self.say("stopping every demo process ...")
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut this
                signal.signal(sig, signal.SIG_IGN)
            self.supervisor.stop_all()
            key_file.unlink(missing_ok=True)
            self.say("demo stopped.")

    def _check_ports(self, port: int, base: int) -> None:
        if not port_is_free(port):
            raise CommandError(
                f"Port {port} on 127.0.0.1 is in use: stop what holds it, "
                f"or run `make demo PORT={port + 10}`."
            )
        ports = (
            *range(base, base + 3 * (NODES + SMOKE_NODES + FLEET_NODES)),
            base + 80,
            base + 81,
            *(fleet_router_port(base, i) for i in range(FLEET_NODES)),
        )  # nodes, routers
        busy = [p for p in ports if not port_is_free(p)]
        if busy:
            raise CommandError(
                f"Port {busy[0]} (local Triton nodes and router) is in use: stop what holds it, "
                f"or run `make demo TRITON_BASE_PORT={base + 100}`."
            )

    def _start_up(self, port: int, base: int, timeout_s: float) -> None:
        """Wait for each part in turn, saying so; seed once the web and the nodes answer."""
        deadline = time.monotonic() + timeout_s
        web = f"http://127.0.0.1:{port}/login/"
        count = NODES + SMOKE_NODES + FLEET_NODES
        nodes = [f"http://127.0.0.1:{base + 3 * i}/v2/health/ready" for i in range(count)]
        self._until("web", lambda: http_status(web) is not None, deadline)
        self._until("Triton nodes", lambda: all(http_status(u) == 200 for u in nodes), deadline)
        for line in demo_seed(base_port=base, nodes=NODES, key_ref=self.key_ref):
            self.say(line)
        admin = get_user_model().objects.get(username="admin")
        for line in demo_fleet_deploy(actor=admin):
            self.say(line)
        self._until("worker", lambda: check_worker().is_ok, deadline)
        ports = [base + 80, *(fleet_router_port(base, i) for i in range(FLEET_NODES))]
        routers = [f"http://127.0.0.1:{p}/" for p in ports]
        self._until("routers", lambda: all(http_status(u) is not None for u in routers), deadline)
        # A plan's waves are checked against what serves: the fleet's deployments first.
        self._until("eu and us", demo_fleet_serving, deadline, verb="serve risk_score")
        for line in demo_plan_seed(actor=admin, console_url=self.console_url):
            self.say(line)

    def _until(
        self, what: str, answers: Callable[[], bool], deadline: float, verb: str = ""
    ) -> None:
        started = time.monotonic()
        verb = verb or ("answer" if what.endswith("s") else "answers")
        while time.monotonic() < deadline:
            if answers():
                self.say(f"{what} {verb} ({time.monotonic() - started:.0f} s)")
                return
            self.supervisor.check()
            time.sleep(0.5)
        self.say(f"warning: {what} not ready in time; see the logs")
