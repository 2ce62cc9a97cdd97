"""How a node on this host ended, where this host can know it: a tritonserver that is a
child process of this one (started by the local launcher here) leaves its exit status to
it. Linux /proc only; everywhere else the answer is None ("connection lost")."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from urllib.parse import urlsplit

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
LISTEN = "0A"  # TCP state in /proc/net/tcp


def child_serving(http_url: str) -> int | None:
    """The pid of this process's child that listens on the URL's loopback port, else None."""
    parts = urlsplit(http_url)
    if parts.hostname not in LOOPBACK_HOSTS or parts.port is None:
        return None
    inodes = _listening_inodes(parts.port)
    if not inodes:
        return None
    for pid in _children():
        if inodes & _socket_inodes(pid):
            return pid
    return None


def child_exit(pid: int, *, wait_s: float = 5.0) -> str | None:
    """How child `pid` ended ("killed by SIGSEGV (signal 11)", "exited with status 1"),
    waiting up to `wait_s` for it; None when it runs on or is not a child. Never reaps it:
    its owner (subprocess.Popen) still collects it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if info is not None and info.si_pid == pid:
            return _describe(info)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _describe(info) -> str:
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        try:
            name = signal.Signals(info.si_status).name
        except ValueError:
            name = "signal"
        return f"killed by {name} (signal {info.si_status})"
    return f"exited with status {info.si_status}"


def _listening_inodes(port: int) -> set[str]:
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if (
                len(fields) > 9
                and fields[3] == LISTEN
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                found.add(fields[9])
    return found


def _children() -> list[int]:
    pids: list[int] = []
    for task in Path("/proc/self/task").glob("*/children"):
        try:
            pids += [int(pid) for pid in task.read_text().split()]
        except OSError:
            continue
    return pids


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes
