"""A node's memory as the leak watch reads it: Triton's host and GPU memory gauges, and the
resident set of the `tritonserver` process when it runs on this host.

Plain Python, never raises: a figure that cannot be read is None. The gauges are Triton's
own (`nv_cpu_memory_used_bytes` is the host's used memory, so files in /dev/shm and other
processes count; `nv_gpu_memory_used_bytes` per GPU, summed), refreshed every
`--metrics-interval-ms`. The RSS is found by the node's HTTP port on the command line of a
local `tritonserver` (a node Switchyard started, or any on this host); for such a node the
host's shared memory (`Shmem` in /proc/meminfo: files in /dev/shm and other tmpfs, python
backend regions) is read too. On a host that runs other work, used memory moves by hundreds
of MiB within seconds while shared memory moves by the few MiB Triton's regions take: a
model that leaves files in /dev/shm shows there first.
"""

from __future__ import annotations

import http.client
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

_GAUGES = {
    "nv_cpu_memory_used_bytes": "host",
    "nv_cpu_memory_total_bytes": "host_total",
    "nv_gpu_memory_used_bytes": "gpu",
}
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
_PIDS: dict[int, int] = {}  # HTTP port -> pid of the local tritonserver serving it


@dataclass(frozen=True)
class NodeMemory:
    host_bytes: int | None = None
    gpu_bytes: int | None = None
    rss_bytes: int | None = None
    shm_bytes: int | None = None
    host_total_bytes: int | None = None

    @property
    def host_free_bytes(self) -> int | None:
        """The host's memory Triton reports not used (None when either gauge is missing)."""
        if self.host_total_bytes is None or self.host_bytes is None:
            return None
        return max(0, self.host_total_bytes - self.host_bytes)


def _mib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def load_refusal(memory: NodeMemory, *, need_bytes: int, reserve_bytes: int) -> str | None:
    """Why a load of `need_bytes` (the new versions' files: a lower bound of what they take in
    memory) must not start on a node with this memory, keeping `reserve_bytes` free; None
    when it fits, or when the node does not report its memory (nothing to judge by)."""
    free = memory.host_free_bytes
    if free is None or free - need_bytes >= reserve_bytes:
        return None
    return (
        f"not enough memory: {_mib(free)} free, the load needs at least {_mib(need_bytes)} "
        f"(its files) and {_mib(reserve_bytes)} stays free (SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES)"
    )


def gauges_from_text(text: str) -> dict[str, int]:
    """{"host": bytes, "gpu": bytes summed over GPUs} from Prometheus text (missing: absent)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        key = _GAUGES.get(name)
        if key is None:
            continue
        try:
            found[key] = found.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
        except (ValueError, IndexError):
            continue
    # A fresh server prints 0 until its first metrics poll: no host uses no memory.
    return {key: int(value) for key, value in found.items() if value > 0}


def metrics_text(metrics_url: str, timeout_s: float) -> str | None:
    parts = urlsplit(metrics_url if "://" in metrics_url else f"http://{metrics_url}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        conn.request("GET", parts.path or "/metrics", headers={"Connection": "close"})
        response = conn.getresponse()
        body = response.read()
        return body.decode("utf-8", errors="replace") if response.status == 200 else None
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _is_server_on(pid: int, port: int) -> bool:
    args = _cmdline(pid)
    return bool(args) and args[0].endswith("tritonserver") and f"--http-port={port}" in args


def local_server_pid(http_url: str) -> int | None:
    """The pid of the `tritonserver` on this host listening on the URL's port, else None."""
    parts = urlsplit(http_url if "://" in http_url else f"http://{http_url}")
    if parts.hostname not in _LOCAL_HOSTS or parts.port is None:
        return None
    cached = _PIDS.get(parts.port)
    if cached is not None and _is_server_on(cached, parts.port):
        return cached
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _is_server_on(int(entry.name), parts.port):
            _PIDS[parts.port] = int(entry.name)
            return int(entry.name)
    return None


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def shared_memory_bytes() -> int | None:
    """This host's shared memory (tmpfs and System V / POSIX shm), from /proc/meminfo."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def node_memory(http_url: str, metrics_url: str | None, *, timeout_s: float = 2.0) -> NodeMemory:
    """What the node's memory is now (see the module docstring); never raises."""
    text = metrics_text(metrics_url, timeout_s) if metrics_url else None
    gauges = gauges_from_text(text) if text else {}
    pid = local_server_pid(http_url)
    return NodeMemory(
        host_bytes=gauges.get("host"),
        host_total_bytes=gauges.get("host_total"),
        gpu_bytes=gauges.get("gpu"),
        rss_bytes=rss_bytes(pid) if pid else None,
        shm_bytes=shared_memory_bytes() if pid else None,
    )
