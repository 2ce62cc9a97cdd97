"""Steady, realistic demo traffic: KServe JSON inference requests at a fixed total rate,
spread over (node or router, model, version) targets, with sticky `x-user-id` headers.

Plain Python over http.client keep-alive connections; loopback targets only.
"""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from integrations.triton.inputs import generate_inputs, triton_datatype

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost"})
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrafficTarget:
    """Where one kind of request goes: base URL, model, version ('' = unversioned)."""

    base_url: str
    model: str
    version: str
    body: bytes

    @property
    def path(self) -> str:
        versioned = f"/versions/{self.version}" if self.version else ""
        return f"/v2/models/{self.model}{versioned}/infer"


def check_loopback(url: str) -> str:
    """host:port of a loopback URL; ValueError for anything else (demo traffic stays local)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError(f"demo traffic only goes to 127.0.0.1, not {parts.hostname!r}")
    return f"127.0.0.1:{parts.port or 80}"


def _json_data(array: np.ndarray) -> list:
    if array.dtype == np.object_:
        return [v.decode() if isinstance(v, bytes) else str(v) for v in array.ravel()]
    return array.ravel().tolist()


def request_body(config: Mapping[str, Any], *, seed: int = 0) -> bytes:
    """A KServe v2 JSON inference request for `config`, batch 1, seeded inputs."""
    specs = {s["name"]: s for s in config.get("input", [])}
    tensors = generate_inputs(config, batch_size=1, seed=seed)
    inputs = [
        {
            "name": name,
            "shape": list(array.shape),
            "datatype": triton_datatype(specs[name].get("data_type", "TYPE_FP32")),
            "data": _json_data(array),
        }
        for name, array in tensors.items()
    ]
    return json.dumps({"inputs": inputs}).encode()


@dataclass
class TrafficStats:
    sent: int = 0
    by_status: Counter = field(default_factory=Counter)


class Traffic:
    """Sends `rps` requests per second in total over the targets until stop() or `duration_s`."""

    def __init__(self, targets: list[TrafficTarget], *, rps: float, workers: int = 4, users=200):
        if not targets or rps <= 0:
            raise ValueError("Traffic needs at least one target and a positive rate.")
        for target in targets:
            check_loopback(target.base_url)
        self.targets: tuple[TrafficTarget, ...] = tuple(targets)
        self.rps, self.workers = rps, workers
        self.users = [f"user-{i:04d}" for i in range(users)]
        self.stats = TrafficStats()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._slots = itertools.count()
        self._threads: list[threading.Thread] = []

    def start(self) -> Traffic:
        self._start_at = time.monotonic()
        self._threads = [
            threading.Thread(target=self._worker, args=(i,), daemon=True, name=f"traffic-{i}")
            for i in range(self.workers)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> TrafficStats:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        return self.stats

    def run(self, duration_s: float | None = None) -> TrafficStats:
        """Run in this thread's stead until stopped or duration_s passed (bounded loop)."""
        self.start()
        self._stop.wait(timeout=duration_s)
        return self.stop()

    def __enter__(self) -> Traffic:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def retarget(self, targets: list[TrafficTarget]) -> None:
        """Send to these targets from now on (none: the slots pass without a request)."""
        for target in targets:
            check_loopback(target.base_url)
        self.targets = tuple(targets)

    def _next_slot(self) -> tuple[int, float]:
        with self._lock:
            k = next(self._slots)
        return k, self._start_at + k / self.rps

    def _worker(self, index: int) -> None:
        rng = random.Random(index)
        connections: dict[str, http.client.HTTPConnection] = {}
        try:
            while not self._stop.is_set():
                k, due = self._next_slot()
                if self._stop.wait(timeout=max(0.0, due - time.monotonic())):
                    break
                targets = self.targets  # one read: retarget() may swap the tuple
                if targets:
                    self._send_logged(connections, targets[k % len(targets)], rng)
        finally:
            for conn in connections.values():
                conn.close()

    def _send_logged(self, connections: dict, target: TrafficTarget, rng) -> None:
        """One request; whatever goes wrong is counted and logged, never ends the thread."""
        try:
            self._send(connections, target, rng.choice(self.users))
        except Exception as exc:  # noqa: BLE001 - the demo's traffic carries on
            log.warning("request to %s failed: %r", target.path, exc)
            for conn in connections.values():
                conn.close()
            connections.clear()
            with self._lock:
                self.stats.sent += 1
                self.stats.by_status[type(exc).__name__] += 1

    def _send(self, connections: dict, target: TrafficTarget, user: str) -> None:
        host = check_loopback(target.base_url)
        conn = connections.get(host) or http.client.HTTPConnection(host, timeout=10)
        connections[host] = conn
        headers = {"Content-Type": "application/json", "x-user-id": user}
        try:
            conn.request("POST", target.path, body=target.body, headers=headers)
            response = conn.getresponse()
            response.read()
            status = str(response.status)
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            connections.pop(host, None)
            status = type(exc).__name__
        with self._lock:
            self.stats.sent += 1
            self.stats.by_status[status] += 1
