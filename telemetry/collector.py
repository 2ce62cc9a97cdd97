"""The collector's core: one `tick(now)` scrapes every node, publishes live points per
cluster and per model, and accumulates per-minute rollups. Fetch, publish and store are
injected, so tests drive ticks with explicit times against real or recorded endpoints.

A node that does not answer is published as stale and its previous snapshot forgotten:
the next answer is a new baseline, so an interval never spans a restart (no negative
rate, no spike). A counter that went down yields no point for that series.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from integrations.triton.metrics import (
    IntervalStats,
    ModelInterval,
    Snapshot,
    compute_interval,
    parse_metrics,
)
from telemetry import events
from telemetry.rollups import RollupBuffer, RollupRow, SeriesDelta, series_delta
from telemetry.scrape import ScrapeError, http_get

log = logging.getLogger(__name__)

FetchFn = Callable[[str, float], Awaitable[str]]
PublishFn = Callable[[dict[str, list[dict]]], Awaitable[None]]
StoreFn = Callable[[list[RollupRow]], Awaitable[None]]


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
    )


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
    ) -> None:
        self.sources, self.publish, self.store = sources, publish, store
        self.rollups = RollupBuffer()
        self.unstored: list[RollupRow] = []  # finished minutes a failed store left behind
        self.last_failed: list[tuple[str, str]] = []  # (cluster, node) stale in the last tick

    async def tick(self, now: float) -> dict[str, list[dict]]:
        """One round: collect, publish (never raises for a bad node), roll up; the payloads."""
        per_source = await asyncio.gather(*(s.collect(now) for s in self.sources))
        results = [r for batch in per_source for r in batch]
        self.last_failed = [(r.cluster, r.node) for r in results if r.stats is None]
        payloads = build_payloads(results, now)
        if self.publish is not None and payloads:
            try:
                await self.publish(payloads)
            except Exception:  # a Redis hiccup must not stop the collector
                log.exception("publishing live points failed")
        self._roll_up(results, now)
        await self.flush(now)
        return payloads

    def _roll_up(self, results: list[NodeResult], now: float) -> None:
        for r in results:
            if r.stats is None:
                continue
            gpus = [g.utilization for g in r.stats.gpus]
            self.rollups.add_node(r.cluster, r.node, now, r.stats.cpu_utilization, gpus)
            for (model, version), delta in r.deltas.items():
                self.rollups.add_series(r.cluster, r.node, model, version, now, delta)

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
