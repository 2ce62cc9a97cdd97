"""Per-minute accumulation of counter deltas and gauges, pure (no ORM, no clock).

The collector adds each interval's deltas to the minute in which the interval ended and
pops whole minutes once time has moved past them; telemetry.services writes the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from integrations.triton.metrics import ModelSeries, series_deltas

_COMPUTE = ("compute_input_us", "compute_infer_us", "compute_output_us")


@dataclass
class SeriesDelta:
    """What one (model, version) did on one node during one interval."""

    requests: float = 0.0
    successes: float = 0.0
    failures: float = 0.0
    request_us: float = 0.0
    queue_us: float = 0.0
    compute_us: float = 0.0
    p99_ms: float | None = None
    output_tokens: float = 0.0  # a generative model's own count (0: it counts none)


def series_delta(before: ModelSeries | None, now: ModelSeries) -> SeriesDelta | None:
    """Counter deltas between two scrapes, or None by the restart rule of `series_deltas`."""
    deltas = series_deltas(before, now)
    if deltas is None:
        return None
    diffs, fails = deltas
    p99 = now.quantile("request", "0.99")
    successes = diffs.get("success", 0.0)
    return SeriesDelta(
        requests=successes + sum(fails.values()),
        successes=successes,
        failures=sum(fails.values()),
        request_us=diffs.get("request_us", 0.0),
        queue_us=diffs.get("queue_us", 0.0),
        compute_us=sum(diffs.get(k, 0.0) for k in _COMPUTE),
        p99_ms=p99 / 1000.0 if p99 is not None and math.isfinite(p99) else None,
        output_tokens=diffs.get("output_tokens", 0.0),
    )


@dataclass
class _Gauges:
    cpu_sum: float = 0.0
    cpu_n: int = 0
    gpu_sum: float = 0.0
    gpu_n: int = 0

    def add(self, cpu: float | None, gpus: list[float]) -> None:
        if cpu is not None:
            self.cpu_sum, self.cpu_n = self.cpu_sum + cpu, self.cpu_n + 1
        for util in gpus:
            self.gpu_sum, self.gpu_n = self.gpu_sum + util, self.gpu_n + 1

    def averages(self) -> tuple[float | None, float | None]:
        cpu = self.cpu_sum / self.cpu_n if self.cpu_n else None
        return cpu, (self.gpu_sum / self.gpu_n if self.gpu_n else None)


OWN_COLUMNS = ("probe_requests", "warmup_requests", "smoke_requests", "benchmark_requests")


@dataclass
class RollupRow:
    """One finished minute of one series; model '' is the node's own row."""

    cluster: str
    node: str
    model: str
    version: str
    minute: float
    requests: float = 0.0
    successes: float = 0.0
    failures: float = 0.0
    request_us: float = 0.0
    queue_us: float = 0.0
    compute_us: float = 0.0
    p99_ms: float | None = None
    cpu_util_avg: float | None = None
    gpu_util_avg: float | None = None
    samples: int = 0
    # The control plane's own requests (telemetry/own_split.py); requests above are clients'.
    probe_requests: float = 0.0
    warmup_requests: float = 0.0
    smoke_requests: float = 0.0
    benchmark_requests: float = 0.0
    own_successes: float = 0.0
    split_inexact: bool = False
    output_tokens: float = 0.0

    def add_own(self, own, is_inexact: bool) -> None:
        """Add one interval's own requests (an own_split.Own) to their columns."""
        for origin, n in own.by_origin.items():
            column = f"{origin}_requests"
            if column in OWN_COLUMNS:  # an origin this code does not know counts nowhere
                setattr(self, column, getattr(self, column) + n)
        self.own_successes += own.successes
        self.split_inexact = self.split_inexact or is_inexact


NodeKey = tuple[str, str, float]  # cluster, node, minute


@dataclass
class RollupBuffer:
    """Minutes in progress, keyed by (cluster, node, minute) then by (model, version)."""

    rows: dict[NodeKey, dict[tuple[str, str], RollupRow]] = field(default_factory=dict)
    gauges: dict[NodeKey, _Gauges] = field(default_factory=dict)

    @staticmethod
    def minute_of(ts: float) -> float:
        return math.floor(ts / 60.0) * 60.0

    def add_node(self, cluster: str, node: str, ts: float, cpu: float | None, gpus: list) -> None:
        """Record one sample of a node's CPU and GPU utilization."""
        key = (cluster, node, self.minute_of(ts))
        self.rows.setdefault(key, {})
        self.gauges.setdefault(key, _Gauges()).add(cpu, [g for g in gpus if g is not None])

    def add_series(
        self, cluster: str, node: str, model: str, version: str, ts: float, d, split=None
    ) -> None:
        """Add one interval's SeriesDelta (clients' counts when `split`, an own_split.Split,
        says what was the control plane's own) to the minute in which it ended."""
        minute = self.minute_of(ts)
        per_node = self.rows.setdefault((cluster, node, minute), {})
        row = per_node.get((model, version))
        if row is None:
            row = per_node[(model, version)] = RollupRow(cluster, node, model, version, minute)
        row.requests += d.requests
        row.successes += d.successes
        row.failures += d.failures
        row.request_us += d.request_us
        row.queue_us += d.queue_us
        row.compute_us += d.compute_us
        row.output_tokens += d.output_tokens
        if d.p99_ms is not None:
            row.p99_ms = d.p99_ms if row.p99_ms is None else max(row.p99_ms, d.p99_ms)
        row.samples += 1
        if split is not None:
            row.add_own(split.own, split.is_inexact)

    def take_back(
        self, cluster: str, node: str, model: str, version: str, successes: float, failures: float
    ) -> tuple[float, float]:
        """Take up to these counts off the client counts of the series' rows still buffered,
        newest minute first (own requests counted after Triton's scrape showed them); what
        could not be taken back, (successes, failures)."""
        minutes = sorted((k for k in self.rows if k[:2] == (cluster, node)), reverse=True)
        for key in minutes:
            row = self.rows[key].get((model, version))
            if row is None:
                continue
            took_s, took_f = min(successes, row.successes), min(failures, row.failures)
            row.successes, row.failures = row.successes - took_s, row.failures - took_f
            row.requests -= took_s + took_f
            successes, failures = successes - took_s, failures - took_f
            if not successes and not failures:
                break
        return successes, failures

    def pop_completed(self, now: float | None = None) -> list[RollupRow]:
        """Rows of every minute before the one `now` is in (all of them when now is None)."""
        current = None if now is None else self.minute_of(now)
        done = [k for k in self.rows if current is None or k[2] < current]
        out: list[RollupRow] = []
        for key in sorted(done):
            gauges = self.gauges.pop(key, _Gauges())
            cpu, gpu = gauges.averages()
            node_row = RollupRow(*key[:2], "", "", key[2], cpu_util_avg=cpu, gpu_util_avg=gpu)
            node_row.samples = gauges.cpu_n
            series = list(self.rows.pop(key).values())
            for row in series:
                row.cpu_util_avg, row.gpu_util_avg = cpu, gpu
            out.extend([node_row, *series])
        return out
