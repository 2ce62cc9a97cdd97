"""The collector's core: one `tick(now)` scrapes every node, publishes live points per
cluster and per model, and accumulates per-minute rollups. Fetch, publish and store are
injected, so tests drive ticks with explicit times against real or recorded endpoints; so
are the reads of the control plane's own traffic, taken off Triton's counts
(telemetry/own_split.py).

A node that does not answer is published as stale and its previous snapshot forgotten:
the next answer is a new baseline, so an interval never spans a restart (no negative
rate, no spike). A counter that went down yields no point for that series.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace

from deployments.temporary import served_model
from integrations.triton.metrics import (
    IntervalStats,
    ModelInterval,
    Snapshot,
    compute_interval,
    parse_metrics,
)
from telemetry import events
from telemetry.own_split import Counts, Own, Split, own_deltas, split_interval
from telemetry.rollups import RollupBuffer, RollupRow, SeriesDelta, series_delta
from telemetry.scrape import ScrapeError, http_get

log = logging.getLogger(__name__)

FetchFn = Callable[[str, float], Awaitable[str]]
PublishFn = Callable[[dict[str, list[dict]]], Awaitable[None]]
StoreFn = Callable[[list[RollupRow]], Awaitable[None]]
# (cluster, node) pairs -> their own-traffic counters (deployments/own_traffic.py).
OwnReadFn = Callable[[list[tuple[str, str]]], Awaitable[dict[tuple[str, str], Counts]]]
# (cluster, node, [(model, version, origin)]): drop those own counters of the node.
OwnForgetFn = Callable[[str, str, list[tuple[str, str, str]]], Awaitable[None]]
# Own counters of a series the node has not shown for this long are dropped.
OWN_FORGET_AFTER_S = 600.0


@dataclass(frozen=True)
class Target:
    """One node to scrape."""

    cluster: str
    node: str
    url: str


@dataclass
class NodeResult:
    """One node's outcome for one tick; `stats` None means stale (it did not answer)."""

    cluster: str
    node: str
    stats: IntervalStats | None
    deltas: dict[tuple[str, str], SeriesDelta] = field(default_factory=dict)
    error: str = ""
    # Set by the collector when own traffic was read: the split of each series' interval.
    splits: dict[tuple[str, str], Split] = field(default_factory=dict)


@dataclass
class _Last:
    snapshot: Snapshot
    at: float


class Source:
    """Something that yields NodeResults for a tick (scrape targets or a Prometheus)."""

    async def collect(self, now: float) -> list[NodeResult]:  # pragma: no cover - interface
        raise NotImplementedError


class ScrapeSource(Source):
    """Scrapes node metrics URLs concurrently and diffs each against its previous scrape."""

    def __init__(self, targets: Iterable[Target], *, fetch: FetchFn = http_get, timeout_s=1.5):
        self.targets = list(targets)
        self.fetch, self.timeout_s = fetch, timeout_s
        self.last: dict[Target, _Last] = {}

    def set_targets(self, targets: Iterable[Target]) -> None:
        """Replace the target list, keeping the baselines of targets that stay."""
        self.targets = list(targets)
        self.last = {t: v for t, v in self.last.items() if t in set(self.targets)}

    async def collect(self, now: float) -> list[NodeResult]:
        return list(await asyncio.gather(*(self._one(t, now) for t in self.targets)))

    async def _one(self, target: Target, now: float) -> NodeResult:
        try:
            snapshot = parse_metrics(await self.fetch(target.url, self.timeout_s))
        except (ScrapeError, ValueError, OSError) as exc:
            self.last.pop(target, None)
            return NodeResult(target.cluster, target.node, None, error=str(exc) or "no answer")
        before = self.last.get(target)
        self.last[target] = _Last(snapshot, now)
        if before is None or now <= before.at:
            stats = compute_interval(Snapshot(), snapshot, 1.0)  # gauges only, series "new"
            return NodeResult(target.cluster, target.node, stats)
        stats = compute_interval(before.snapshot, snapshot, now - before.at)
        deltas = {}
        for key, series in snapshot.models.items():
            delta = series_delta(before.snapshot.models.get(key), series)
            if delta is not None:
                deltas[key] = delta
        return NodeResult(target.cluster, target.node, stats, deltas)


def _client_rates(series: ModelInterval, split: Split, dt_s: float) -> None:
    """Live points show client traffic: the rates of a split interval are the clients'."""
    if series.status != "ok" or dt_s <= 0:
        return
    series.request_rate = split.requests / dt_s
    series.success_rate_pct = split.successes / split.requests * 100.0 if split.requests else None


def _weighted(items: list[tuple[float | None, float]]) -> float | None:
    pairs = [(v, w) for v, w in items if v is not None and w > 0]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def aggregate(series: list[ModelInterval]) -> ModelInterval:
    """One model version over several nodes: rates add up, averages weigh by traffic."""
    rates = [(s, s.request_rate or 0.0) for s in series]
    ok_rates = [(s, r * (s.success_rate_pct or 0.0) / 100.0) for s, r in rates]
    total = sum(r for _, r in rates)
    succeeded = sum(r for _, r in ok_rates)
    p99s = [s.p99_ms for s in series if s.p99_ms is not None]
    failures: dict[str, float] = defaultdict(float)
    for s in series:
        for reason, n in s.failures.items():
            failures[reason] += n
    first = series[0]
    return ModelInterval(
        model=first.model,
        version=first.version,
        status="ok",
        labels={},
        pending=sum(s.pending for s in series),
        p50_ms=None,
        p99_ms=max(p99s) if p99s else None,
        request_rate=total,
        success_rate_pct=succeeded / total * 100.0 if total else None,
        failures=dict(failures),
        avg_request_ms=_weighted([(s.avg_request_ms, w) for s, w in ok_rates]),
        avg_queue_ms=_weighted([(s.avg_queue_ms, w) for s, w in ok_rates]),
        avg_compute_ms=_weighted([(s.avg_compute_ms, w) for s, w in ok_rates]),
        avg_batch_size=_weighted([(s.avg_batch_size, w) for s, w in rates]),
        output_tokens_rate=_summed([s.output_tokens_rate for s in series]),
    )


def _summed(values: list[float | None]) -> float | None:
    """The sum over nodes of a rate some may not report (None where none does)."""
    seen = [v for v in values if v is not None]
    return sum(seen) if seen else None


def _as_served(series: ModelInterval) -> ModelInterval:
    """A config canary's sibling series shown as its model's (deployments/temporary.py)."""
    model, version = served_model(series.model, series.version)
    if model == series.model:
        return series
    return replace(series, model=model, version=version)


def build_payloads(results: list[NodeResult], now: float) -> dict[str, list[dict]]:
    """Group name -> payloads: node and model points per cluster, model points per model."""
    groups: dict[str, list[dict]] = defaultdict(list)
    per_version: dict[tuple[str, str, str], list[ModelInterval]] = defaultdict(list)
    stale_clusters = {r.cluster for r in results if r.stats is None}
    for r in results:
        cluster_group = events.cluster_group(r.cluster)
        groups[cluster_group].append(
            events.node_point(ts=now, cluster=r.cluster, node=r.node, stats=r.stats, error=r.error)
        )
        for series in r.stats.models if r.stats else ():
            if series.status != "ok":
                continue  # new or reset: no rates this interval, so no point
            series = _as_served(series)
            point = events.model_point(ts=now, cluster=r.cluster, node=r.node, series=series)
            groups[cluster_group].append(point)
            groups[events.model_group(series.model)].append(point)
            per_version[(r.cluster, series.model, series.version)].append(series)
    for (cluster, model, _version), series in per_version.items():
        status = "partial" if cluster in stale_clusters else "ok"
        point = events.model_point(
            ts=now, cluster=cluster, node=events.ALL_NODES, series=aggregate(series), status=status
        )
        groups[events.cluster_group(cluster)].append(point)
        groups[events.model_group(model)].append(point)
    return dict(groups)


# Rollup rows kept while the database is away: a minute of 100 nodes x 40 model versions is
# about 4,000 rows, so this holds about an hour of such a fleet.
MAX_UNSTORED_ROWS = 250_000


class Collector:
    """Ticks its sources, publishes the points, and stores finished rollup minutes."""

    def __init__(
        self,
        sources: list[Source],
        *,
        publish: PublishFn | None = None,
        store: StoreFn | None = None,
        own_read: OwnReadFn | None = None,
        own_forget: OwnForgetFn | None = None,
    ) -> None:
        self.sources, self.publish, self.store = sources, publish, store
        self.own_read, self.own_forget = own_read, own_forget
        self.own_absent_since: dict[tuple[str, ...], float] = {}  # per node and counter
        self.own_last: dict[tuple[str, str], Counts] = {}  # per (cluster, node)
        self.own_carry: dict[tuple[str, str, str, str], Own] = {}  # per node and series
        self.rollups = RollupBuffer()
        self.unstored: list[RollupRow] = []  # finished minutes a failed store left behind
        self.last_failed: list[tuple[str, str]] = []  # (cluster, node) stale in the last tick

    async def tick(self, now: float) -> dict[str, list[dict]]:
        """One round: collect, publish (never raises for a bad node), roll up; the payloads."""
        own_before = await self._read_own(sorted(self.own_last))
        per_source = await asyncio.gather(*(s.collect(now) for s in self.sources))
        results = [r for batch in per_source for r in batch]
        self.last_failed = [(r.cluster, r.node) for r in results if r.stats is None]
        await self._split_own(results, now, own_before)
        payloads = build_payloads(results, now)
        if self.publish is not None and payloads:
            try:
                await self.publish(payloads)
            except Exception:  # a Redis hiccup must not stop the collector
                log.exception("publishing live points failed")
        self._roll_up(results, now)
        await self.flush(now)
        return payloads

    async def _read_own(self, nodes: list[tuple[str, str]]) -> dict | None:
        """The nodes' own counters; None when they could not be read (Redis away)."""
        if self.own_read is None or not nodes:
            return {}
        try:
            return await self.own_read(nodes)
        except Exception:
            log.exception("reading own traffic failed; this interval counts it as clients'")
            return None

    async def _split_own(self, results: list[NodeResult], now: float, before: dict | None):
        """Take the control plane's own requests off each interval (telemetry/own_split.py).

        The own counters are read just before the scrape: an own request is counted once
        answered, after Triton counted it, so every one in the reading is in the scrape
        too (or in an earlier one: `RollupBuffer.take_back`). A node without a reading yet
        is read after its scrape, as the baseline of both. Without own counters (Redis
        away) the interval stays Triton's whole count and the next reading is a baseline.
        """
        live = [(r.cluster, r.node) for r in results if r.stats is not None]
        for key in set(self.own_last) - set(live):  # stale, or no longer scraped
            self._forget_own(*key)
        if self.own_read is None or not live:
            return
        if before is None:
            for cluster, node in live:
                self._forget_own(cluster, node)
            return
        readings = dict(before)
        first = [key for key in live if key not in readings]
        if first:
            readings.update(await self._read_own(first) or {})
        for r in results:
            key = (r.cluster, r.node)
            if r.stats is not None and key in readings:
                self._split_node(r, readings[key])
        await self._forget_unloaded(results, now)

    async def _forget_unloaded(self, results: list[NodeResult], now: float) -> None:
        """Drop the own counters of series a node has not shown for OWN_FORGET_AFTER_S (a
        smoke test's or a benchmark's temporary model, a version unloaded): nothing can be
        split against them any more, and the node's counters stay small."""
        if self.own_forget is None:
            return
        for r in results:
            node = (r.cluster, r.node)
            reading = self.own_last.get(node)
            if r.stats is None or not reading:
                continue
            shown = {(s.model, s.version) for s in r.stats.models}
            stale = []
            for key in reading:
                since = self.own_absent_since.setdefault((*node, *key), now)
                if key[:2] in shown:
                    del self.own_absent_since[(*node, *key)]
                elif now - since >= OWN_FORGET_AFTER_S:
                    stale.append(key)
            if not stale:
                continue
            try:
                await self.own_forget(r.cluster, r.node, stale)
            except Exception:
                log.exception("forgetting own counters of %s/%s failed", r.cluster, r.node)
                continue
            for key in stale:
                reading.pop(key, None)
                self.own_absent_since.pop((*node, *key), None)

    def _forget_own(self, cluster: str, node: str) -> None:
        self.own_last.pop((cluster, node), None)
        for kept in (self.own_carry, self.own_absent_since):
            for key in [k for k in kept if k[:2] == (cluster, node)]:
                del kept[key]

    def _split_node(self, r: NodeResult, reading: Counts) -> None:
        own = own_deltas(self.own_last.get((r.cluster, r.node)), reading)
        self.own_last[(r.cluster, r.node)] = reading
        for series in r.stats.models:
            key = (series.model, series.version)
            carry_key = (r.cluster, r.node, *key)
            carried = self.own_carry.pop(carry_key, Own())
            if series.status == "new":
                continue  # a baseline: Triton's interval is not counted, nor is its own
            delta = r.deltas.get(key)
            mine = own.get(key, Own())
            if delta is None:  # a reset: only the own requests and the flag are kept
                split = split_interval(None, None, mine, carried)
                if split.is_inexact:
                    r.deltas[key] = SeriesDelta()
            else:
                split = split_interval(delta.successes, delta.failures, mine, carried)
                delta.requests, delta.successes = split.requests, split.successes
                delta.failures = split.failures
            if split.carry.requests:  # own requests Triton showed earlier, or will
                left = self.rollups.take_back(
                    *carry_key, split.carry.successes, split.carry.failures
                )
                if any(left):
                    self.own_carry[carry_key] = Own(successes=left[0], failures=left[1])
            r.splits[key] = split
            _client_rates(series, split, r.stats.dt_s)

    def _roll_up(self, results: list[NodeResult], now: float) -> None:
        for r in results:
            if r.stats is None:
                continue
            gpus = [g.utilization for g in r.stats.gpus]
            self.rollups.add_node(r.cluster, r.node, now, r.stats.cpu_utilization, gpus)
            for (name, number), delta in r.deltas.items():
                split = r.splits.get((name, number))
                model, version = served_model(name, number)  # a sibling's rows: its model's
                self.rollups.add_series(r.cluster, r.node, model, version, now, delta, split)

    async def flush(self, now: float | None = None) -> list[RollupRow]:
        """Store every minute before `now` (all minutes when now is None); the rows.

        A store is one transaction, so rows of a failed one were not written: they are kept
        and go with the next flush (the newest MAX_UNSTORED_ROWS, should the database stay
        away for long).
        """
        rows = self.unstored + self.rollups.pop_completed(now)
        self.unstored = []
        if rows and self.store is not None:
            try:
                await self.store(rows)
            except Exception:
                self.unstored = rows[-MAX_UNSTORED_ROWS:]
                log.exception(
                    "storing %d rollup rows failed; %d kept for the next try",
                    len(rows),
                    len(self.unstored),
                )
        return rows
