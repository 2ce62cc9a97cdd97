"""Driving load at a Triton node: a concurrency sweep under a temporary model name.

No database here: services.benchmark_run reads the row, calls `sweep` outside any
transaction and records what the callbacks report. Facts relied on (docs/TRITON.md §api): the
statistics extension lists pushed models, its counters are cumulative, a request is counted
when its backend releases it, which can follow its response by a moment. So a snapshot
taken after every client thread has joined, once it counts as many requests as the clients
sent (waited for, briefly), covers exactly the requests the clients sent in the window: the
counts match one for one (requests refused by input validation would count nowhere, but
generated inputs always fit).
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import np_to_triton_dtype

from benchmarks.analysis import level_summary, stats_delta, stream_summary
from deployments import own_traffic
from deployments.push import LoadPlan, client_for
from deployments.validation import tensor_limits
from integrations.triton.client import TritonClient
from integrations.triton.errors import TritonError
from integrations.triton.inputs import generate_inputs
from integrations.triton.stream import generate_body, is_decoupled, stream_once

logger = logging.getLogger(__name__)

WARMUP_REQUESTS = 5
TICK_S = 0.25


class Cancelled(Exception):
    """The user asked to stop; levels finished before stay valid."""


@dataclass
class SweepSpec:
    """What to run: the version's load plan, the levels and the request shape."""

    plan: LoadPlan
    version: int
    temp_name: str
    concurrency: Sequence[int]
    duration_s: float
    batch_size: int = 1
    dims_override: Mapping[str, Sequence[int]] = field(default_factory=dict)
    request_timeout_s: float = 30.0
    # A decoupled model's generate request ({} : one from the generated inputs); its
    # requests are streams (integrations/triton/stream.py), timed per event.
    stream_body: Mapping = field(default_factory=dict)

    @property
    def streams(self) -> bool:
        """Whether the version answers over streams only (a decoupled model)."""
        return is_decoupled(self.plan.config_dict)

    def body(self, inputs: Mapping[str, np.ndarray]) -> dict:
        """The generate request each stream sends."""
        return dict(self.stream_body) or generate_body(inputs)


# on_tick(level_index, fraction of the sweep done 0..1) -> True to cancel.
TickFn = Callable[[int, float], bool]
LevelFn = Callable[[dict], None]


def _tensors(inputs: Mapping[str, np.ndarray]) -> list[httpclient.InferInput]:
    tensors = []
    for name, array in inputs.items():
        if array.dtype.kind in "US":
            array = array.astype(np.object_)
        tensor = httpclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array, binary_data=True)
        tensors.append(tensor)
    return tensors


class _Worker(threading.Thread):
    """One client connection sending requests back to back until the deadline or a stop."""

    def __init__(self, url: str, spec: SweepSpec, inputs: dict, deadline: float, stop):
        super().__init__(daemon=True)
        self.url, self.spec, self.inputs = url, spec, inputs
        self.deadline, self.stop = deadline, stop
        self.latencies_ms: list[float] = []
        self.errors = 0
        self.last_error = ""
        self.finished_at = 0.0

    def run(self) -> None:
        timeout = self.spec.request_timeout_s
        scheme, _, address = self.url.partition("://")
        try:
            client = httpclient.InferenceServerClient(
                address, connection_timeout=timeout, network_timeout=timeout, ssl=scheme == "https"
            )
        except Exception as exc:
            self.last_error, self.finished_at = str(exc)[:300], time.perf_counter()
            return
        tensors, version = _tensors(self.inputs), str(self.spec.version)
        try:
            while time.perf_counter() < self.deadline and not self.stop.is_set():
                started = time.perf_counter()
                try:
                    client.infer(self.spec.temp_name, tensors, model_version=version)
                except Exception as exc:  # any failed request counts as an error, never kills
                    self.errors += 1
                    self.last_error = str(exc)[:300]
                    continue
                self.latencies_ms.append((time.perf_counter() - started) * 1000.0)
        finally:
            self.finished_at = time.perf_counter()
            client.close()


class _StreamWorker(_Worker):
    """One keep-alive connection streaming generate requests back to back; per stream its
    time to first event, its events and the time between them after the first."""

    def __init__(self, url: str, spec: SweepSpec, inputs: dict, deadline: float, stop):
        super().__init__(url, spec, inputs, deadline, stop)
        self.first_ms: list[float] = []
        self.inter_ms: list[float] = []
        self.events = 0

    def run(self) -> None:
        timeout, body = self.spec.request_timeout_s, self.spec.body(self.inputs)
        conn = http.client.HTTPConnection(urlsplit(self.url).netloc, timeout=timeout)
        try:
            while time.perf_counter() < self.deadline and not self.stop.is_set():
                seen = stream_once(
                    self.url, self.spec.temp_name, body, version=self.spec.version,
                    timeout_s=timeout, connection=conn,
                )  # fmt: skip
                if not seen.ok:
                    self.errors += 1
                    self.last_error = seen.error
                    continue
                self.latencies_ms.append(seen.total_s * 1000.0)
                self.events += seen.events
                if seen.events:  # its first event's time: the header came with it
                    self.first_ms.append(seen.first_s * 1000.0)
                if seen.inter_event_ms is not None:
                    self.inter_ms.append(seen.inter_event_ms)
        finally:
            self.finished_at = time.perf_counter()
            conn.close()


def _stream_figures(workers: list[_StreamWorker], elapsed_s: float) -> dict:
    """A streaming level's figures from its clients' streams (benchmarks/analysis.py)."""
    return stream_summary(
        first_ms=[ms for w in workers for ms in w.first_ms],
        inter_ms=[ms for w in workers for ms in w.inter_ms],
        streams=sum(len(w.latencies_ms) for w in workers),
        events=sum(w.events for w in workers),
        elapsed_s=elapsed_s,
    )


def _stats(client: TritonClient, spec: SweepSpec) -> dict | None:
    rows = client.statistics(spec.temp_name, spec.version)
    return rows[0] if rows else None


# How long the server's counters may lag the last response of a level (or of the warm-up);
# the wait ends as soon as they count every request sent, so this costs time only on a
# machine busy enough that a count lags.
COUNT_LAG_S = 5.0


def _stats_covering(client: TritonClient, spec: SweepSpec, before: dict | None, sent: int):
    """The stats row once it counts the `sent` requests of the window (at most COUNT_LAG_S
    later): Triton counts a request when its backend releases it, which can follow the
    response by a moment (docs/TRITON.md), and a count read too early would pass the
    level's last request on to the next level's window."""
    deadline = time.monotonic() + COUNT_LAG_S
    while True:
        after = _stats(client, spec)
        counted = stats_delta(before, after, 1.0).get("server_requests", 0)
        if counted >= sent or time.monotonic() >= deadline:
            return after
        time.sleep(0.02)


def run_level(
    client: TritonClient, spec: SweepSpec, index: int, on_tick: TickFn, *, node=None
) -> tuple[dict, bool]:
    """One level: N threads for duration_s; (summary with server delta, cancelled?). With
    the node, its requests are counted as the control plane's own (deployments/own_traffic)."""
    concurrency = spec.concurrency[index]
    inputs = generate_inputs(
        spec.plan.config_dict,
        batch_size=spec.batch_size,
        dims_override=spec.dims_override,
        limits=tensor_limits(),
    )
    stop = threading.Event()
    before = _stats(client, spec)
    started = time.perf_counter()
    kind = _StreamWorker if spec.streams else _Worker
    workers = [
        kind(client.node, spec, inputs, started + spec.duration_s, stop) for _ in range(concurrency)
    ]
    own = _OwnCount(node, spec, workers) if node is not None else None
    for worker in workers:
        worker.start()
    for worker in workers:
        while worker.is_alive():
            worker.join(TICK_S)
            if own is not None:
                own.flush()
            done = min(1.0, (time.perf_counter() - started) / spec.duration_s)
            if on_tick(index, (index + done) / len(spec.concurrency)):
                stop.set()
    # The window ends when the last response arrived, not when this loop noticed it.
    elapsed = max(worker.finished_at for worker in workers) - started
    if own is not None:
        own.flush()
    summary = level_summary(
        concurrency=concurrency,
        latencies_ms=[ms for w in workers for ms in w.latencies_ms],
        errors=sum(w.errors for w in workers),
        elapsed_s=elapsed,
    )
    after = _stats_covering(client, spec, before, summary["requests"])
    summary.update(stats_delta(before, after, elapsed))
    if spec.streams:
        summary.update(_stream_figures(workers, elapsed))
    errors = [w.last_error for w in workers if w.last_error]
    if errors:
        summary["last_error"] = errors[0]
    return summary, stop.is_set()


class _OwnCount:
    """Counts a level's answered requests as the control plane's own every TICK_S, so the
    collector takes them off Triton's counters (deployments/own_traffic.py) at most a
    moment after Triton shows them; one Redis call a tick, none per request."""

    def __init__(self, node, spec: SweepSpec, workers: list[_Worker]) -> None:
        self.where = {"cluster": node.cluster.name, "node": node.name, "model": spec.temp_name}
        self.version, self.workers = spec.version, workers
        self.counted = (0, 0)

    def flush(self) -> None:
        ok = sum(len(w.latencies_ms) for w in self.workers)
        failed = sum(w.errors for w in self.workers)
        for n, is_ok in ((ok - self.counted[0], True), (failed - self.counted[1], False)):
            if n > 0:
                own_traffic.own_request_count(
                    **self.where,
                    version=self.version,
                    origin=own_traffic.BENCHMARK,
                    is_ok=is_ok,
                    n=n,
                )
        self.counted = (ok, failed)


def _load(client: TritonClient, spec: SweepSpec) -> None:
    config = json.loads(spec.plan.config_json)
    config["name"] = spec.temp_name
    client.load(spec.temp_name, config_json=json.dumps(config), files=spec.plan.files)
    client.wait_ready(spec.temp_name, [spec.version], timeout_s=client.load_timeout_s)


def _warm_up(client: TritonClient, spec: SweepSpec, node=None) -> None:
    """WARMUP_REQUESTS requests, then a wait until the server counts them all, so that none
    is counted late in the first level's window."""
    before = _stats(client, spec)
    inputs = generate_inputs(
        spec.plan.config_dict,
        batch_size=spec.batch_size,
        dims_override=spec.dims_override,
        limits=tensor_limits(),
    )
    for _ in range(WARMUP_REQUESTS):
        if node is None:
            _warm_one(client, spec, inputs)
            continue
        with own_traffic.counted(node, spec.temp_name, spec.version, own_traffic.BENCHMARK):
            _warm_one(client, spec, inputs)
    _stats_covering(client, spec, before, WARMUP_REQUESTS)


def _warm_one(client: TritonClient, spec: SweepSpec, inputs: dict) -> None:
    """One warm-up request: an inference, or a whole stream for a decoupled model (whose
    failure fails the run before any level, as a failed inference does)."""
    if not spec.streams:
        client.infer(spec.temp_name, inputs, version=spec.version)
        return
    seen = stream_once(
        client.node, spec.temp_name, spec.body(inputs), version=spec.version,
        timeout_s=spec.request_timeout_s,
    )  # fmt: skip
    if not seen.ok:
        raise ValueError(f"The warm-up stream failed: {seen.error}")


def sweep(node, spec: SweepSpec, *, on_tick: TickFn, on_level: LevelFn) -> None:
    """Load, warm up, run every level, report each; always unloads. Raises Cancelled."""
    with client_for(node) as client:
        try:
            _load(client, spec)
            _warm_up(client, spec, node)
            for index in range(len(spec.concurrency)):
                if on_tick(index, index / len(spec.concurrency)):
                    raise Cancelled()
                summary, cancelled = run_level(client, spec, index, on_tick, node=node)
                if cancelled:
                    raise Cancelled()
                on_level(summary)
        finally:
            _unload_quietly(client, spec.temp_name)


def _unload_quietly(client: TritonClient, name: str) -> None:
    try:
        client.unload(name)
    except TritonError as exc:  # the original error matters more; reconcile sees leftovers
        logger.warning("benchmark could not unload %s: %s", name, exc)
