"""The web command: several daphne processes serving the ASGI app on one address.

One daphne process runs every page, API call and websocket under one GIL: on a machine with
several cores the others stay idle while requests queue. This launcher starts
`SWITCHYARD_WEB_PROCESSES` daphne processes (default: the cores this process may use,
`cpu_count()` below) and binds, for each process and each address, a listening socket of its
own with SO_REUSEPORT (daphne adopts it: `-e fd:fileno=N`): the kernel spreads new
connections over the processes by a hash of each connection's addresses and ports.

One socket shared by every process spread nothing: Twisted accepts every connection waiting
when it wakes, so the first process awake took a whole burst, and keep-alive clients (a
proxy's upstream pool, ten API clients) stayed on one process while the others idled
(bench/README.md, api_scale). A process that exits is started again on the same sockets,
which the launcher keeps open: the connections the kernel hands them meanwhile wait in
their queue for the new process, none is refused. Before binding, the launcher checks that
nothing listens on the address yet (a reuse-port group would otherwise let another server of
the same user share it silently).

Each process is a whole daphne: the request body limits (controlplane/daphne_limits.py) apply
in each, websockets reach every process's clients through the Redis channel layer, and each
has its own database pool of SWITCHYARD_DATABASE_POOL_SIZE connections.

    python -m controlplane.web_server -b 127.0.0.1 -p 8000 [--processes N] [daphne options]
    python -m controlplane.web_server -e tcp:port=8000:interface=10.0.0.3 -e ... [...]

A process that exits within START_GRACE_S of its start means the app cannot start (settings,
database): every process is stopped and the launcher exits with its status. SIGTERM or SIGINT
stops every process (SIGKILL after STOP_GRACE_S); a process whose launcher dies gets SIGTERM
from the kernel. Imports no app, not even Django: each daphne process loads the settings
itself.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

APP = "controlplane.asgi:application"
RESTART_AFTER_S = 1.0
START_GRACE_S = 5.0
STOP_GRACE_S = 20.0
BACKLOG = 2048
PR_SET_PDEATHSIG = 1


def cpu_count(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota
    (a container's `--cpus`, a Kubernetes CPU limit), rounded up; at least 1."""
    cores = len(os.sched_getaffinity(0))
    try:
        quota, period = (cgroup_root / "cpu.max").read_text().split()
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def processes_wanted(given: int | None) -> int:
    """--processes, else SWITCHYARD_WEB_PROCESSES, else one per core."""
    if given is None:
        raw = os.environ.get("SWITCHYARD_WEB_PROCESSES", "").strip()
        given = int(raw) if raw else cpu_count()
    if given < 1:
        raise SystemExit("web_server: the number of processes must be at least 1")
    return given


def tcp_endpoint(text: str) -> tuple[str, int]:
    """'tcp:port=8000:interface=10.0.0.3' (Twisted's form, as daphne takes it) -> address."""
    kind, *fields = text.split(":")
    values = dict(f.split("=", 1) for f in fields if "=" in f)
    if kind != "tcp" or "port" not in values:
        raise argparse.ArgumentTypeError(f"only tcp:port=N[:interface=ADDR] endpoints: {text}")
    return values.get("interface", "0.0.0.0"), int(values["port"])


def _address_free(host: str, port: int) -> None:
    """Refuse an address something already listens on, as a plain bind would."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
    except OSError as exc:
        raise SystemExit(f"web_server: cannot listen on {host}:{port}: {exc.strerror}") from None
    finally:
        probe.close()


def listen_group(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one address (SO_REUSEPORT), one per process."""
    if ":" in host:
        raise SystemExit(f"web_server: IPv4 addresses only (daphne adopts those): {host}")
    if port:
        _address_free(host, port)
    group: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        port = sock.getsockname()[1]  # port 0: the others join the port the first one got
        sock.listen(BACKLOG)
        sock.setblocking(False)
        sock.set_inheritable(True)
        group.append(sock)
    return group


def daphne_command(sockets: list[socket.socket], extra: list[str]) -> list[str]:
    command = [sys.executable, "-m", "daphne"]
    for sock in sockets:  # daphne's fd endpoint adopts IPv4 sockets only (its default family)
        command += ["-e", f"fd:fileno={sock.fileno()}"]
    return [*command, *extra, APP]


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the launcher dies, however it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class _Stop(Exception):
    pass


def _raise_stop(*_) -> None:
    raise _Stop


class Launcher:
    """Keeps a daphne process running on each slot's sockets until told to stop."""

    def __init__(self, slots: list[list[socket.socket]], extra: list[str]) -> None:
        self.slots, self.extra, self.count = slots, extra, len(slots)
        self.children: dict[int, tuple[subprocess.Popen, float]] = {}

    def _start(self, slot: int) -> None:
        sockets = self.slots[slot]
        proc = subprocess.Popen(
            daphne_command(sockets, self.extra),
            pass_fds=[s.fileno() for s in sockets],
            preexec_fn=_die_with_parent,
        )
        self.children[slot] = (proc, time.monotonic())

    def run(self) -> int:
        for slot in range(self.count):
            self._start(slot)
        print(f"web_server: {self.count} daphne processes", file=sys.stderr, flush=True)
        while True:
            for slot, (proc, started) in list(self.children.items()):
                code = proc.poll()
                if code is None:
                    continue
                if code > 0 and time.monotonic() - started < START_GRACE_S:
                    # It failed to start (settings, imports, the database): starting it
                    # again would fail the same way. One killed by a signal is replaced.
                    print(f"web_server: a process exited at start ({code})", file=sys.stderr)
                    return code
                print(
                    f"web_server: process {proc.pid} exited ({code}); starting another",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(RESTART_AFTER_S)
                self._start(slot)
            time.sleep(0.2)

    def stop(self) -> None:
        procs = [proc for proc, _ in self.children.values() if proc.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m controlplane.web_server")
    parser.add_argument("-b", "--bind", default=None, help="address (with -p)")
    parser.add_argument("-p", "--port", type=int, default=None)
    parser.add_argument("-e", "--endpoint", type=tcp_endpoint, action="append", default=[])
    parser.add_argument("--processes", type=int, default=None)
    args, extra = parser.parse_known_args(argv)
    if args.port is not None:
        args.endpoint.append((args.bind or "127.0.0.1", args.port))
    if not args.endpoint:
        parser.error("give -p PORT (and -b ADDRESS) or at least one -e tcp:port=... endpoint")
    return args, extra


def main(argv: list[str] | None = None) -> int:
    args, extra = parse(sys.argv[1:] if argv is None else argv)
    count = processes_wanted(args.processes)
    groups = [listen_group(host, port, count) for host, port in args.endpoint]
    slots = [[group[slot] for group in groups] for slot in range(count)]  # a socket per address
    launcher = Launcher(slots, extra)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _raise_stop)
    try:
        return launcher.run()
    except _Stop:
        return 0
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        launcher.stop()
        for group in groups:
            for sock in group:
                sock.close()


if __name__ == "__main__":
    sys.exit(main())
