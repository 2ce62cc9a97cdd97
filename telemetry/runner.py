"""The long-running collector loop: sources from the database, ticks at a fixed cadence,
points to the Redis channel layer, finished rollup minutes to PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import time

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from deployments import own_traffic
from telemetry import events, recent, selectors, services, status
from telemetry.collector import Collector, ScrapeSource
from telemetry.prometheus import PrometheusSource
from telemetry.rollups import RollupRow

log = logging.getLogger(__name__)


async def channel_publish(payloads: dict[str, list[dict]]) -> None:
    """One channel-layer message per group with every payload of this tick, and the same
    points into the recent buffer that live pages open with (telemetry/recent.py)."""
    layer = get_channel_layer()
    await asyncio.gather(*(layer.group_send(g, events.batch(p)) for g, p in payloads.items()))
    try:
        await asyncio.to_thread(recent.recent_record, payloads=payloads, now=time.time())
    except Exception:  # a Redis hiccup costs the buffer a tick, never the collector
        log.exception("buffering recent live points failed")


async def own_read(nodes: list[tuple[str, str]]) -> dict:
    """The own-traffic counters of these nodes (read just before their scrape)."""
    return await asyncio.to_thread(own_traffic.own_counts_read, nodes)


async def own_forget(cluster: str, node: str, keys: list[tuple[str, str, str]]) -> None:
    """Drop own counters the collector no longer needs (series the node stopped showing)."""
    await asyncio.to_thread(own_traffic.own_counts_forget, cluster=cluster, node=node, keys=keys)


async def store_rollups(rows: list[RollupRow]) -> None:
    """Write rollups in a worker thread: the event loop never waits on PostgreSQL."""
    await asyncio.to_thread(_store_sync, rows)


def _store_sync(rows: list[RollupRow]) -> None:
    # Worker threads come and go: each call closes its connection (rare: once a minute).
    try:
        services.rollups_write(rows=rows)
    finally:
        connection.close()


def _read_sources() -> tuple[list, list]:
    try:
        return selectors.scrape_targets(), selectors.prometheus_clusters()
    finally:
        connection.close()


class CollectorRunner:
    """Owns the Collector; refreshes its node list now and then; ticks until told to stop."""

    def __init__(self, *, interval_s: float, timeout_s: float | None = None) -> None:
        self.interval_s = interval_s
        timeout = timeout_s or min(settings.TELEMETRY_SCRAPE_TIMEOUT_S, interval_s * 0.8)
        self.scrape = ScrapeSource([], timeout_s=timeout)
        self.prometheus: dict[str, PrometheusSource] = {}
        self.collector = Collector(
            [self.scrape],
            publish=channel_publish,
            store=store_rollups,
            own_read=own_read,
            own_forget=own_forget,
        )

    async def refresh_sources_or_keep(self) -> bool:
        """`refresh_sources`, or keep the sources as they are when the database cannot be
        read (it is restarting, or refuses connections): the collector never exits on it,
        and tries again at the next refresh. True when the sources were read."""
        try:
            await self.refresh_sources()
        except Exception as exc:
            log.error(
                "collector: nodes not re-read (kept %d sources): %s",
                len(self.collector.sources),
                exc,
            )
            return False
        return True

    async def refresh_sources(self) -> None:
        """Re-read clusters and nodes, keeping baselines of nodes that stay."""
        targets, prom = await asyncio.to_thread(_read_sources)
        self.scrape.set_targets(targets)
        self.prometheus = {
            p.cluster: self.prometheus.get(p.cluster) or PrometheusSource(p, self.interval_s)
            for p in prom
        }
        for p in prom:
            self.prometheus[p.cluster].cluster = p
        self.collector.sources = [self.scrape, *self.prometheus.values()]

    async def _tick(self) -> None:
        started = time.time()
        await self.collector.tick(started)
        try:  # the collector's own health for /metrics; a Redis hiccup must not stop it
            await asyncio.to_thread(
                status.collector_status_record,
                at=time.time(),
                took_s=time.time() - started,
                failed=self.collector.last_failed,
            )
        except Exception:
            log.exception("recording the collector's status failed")

    async def run(self, stop: asyncio.Event, *, ticks: int | None = None) -> None:
        """Tick every interval_s (skipping missed ticks) until `stop` is set or `ticks` ran."""
        refresh_every = settings.TELEMETRY_TARGETS_REFRESH_S
        retry_s = min(refresh_every, 5.0)  # sources not read: try again sooner
        ok = await self.refresh_sources_or_keep()
        refreshed, next_at, done = time.monotonic(), time.monotonic(), 0
        try:
            while not stop.is_set() and (ticks is None or done < ticks):
                if time.monotonic() - refreshed > (refresh_every if ok else retry_s):
                    ok = await self.refresh_sources_or_keep()
                    refreshed = time.monotonic()
                await self._tick()
                done += 1
                next_at += self.interval_s
                if next_at < time.monotonic():  # fell behind: skip, never burst
                    next_at = time.monotonic() + self.interval_s
                try:
                    await asyncio.wait_for(stop.wait(), timeout=next_at - time.monotonic())
                except TimeoutError:
                    pass
        finally:
            await self.collector.flush(None)
