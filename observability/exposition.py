"""Switchyard's own metrics in Prometheus' text format, computed when scraped.

Nothing is counted in process memory: web, workers, beat and the collector are separate
processes (and replicas), so every value comes from PostgreSQL rows or from Redis at scrape
time, and any web replica gives the same answer. Counters derived from rows only go down when
rows are deleted (Prometheus treats that as a reset).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import redis
from django.conf import settings
from django.db import DatabaseError
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from controlplane.db_pool import PoolStats, published_stats
from core import redis_pool
from observability import selectors
from telemetry.status import CollectorStatus, collector_status_read

log = logging.getLogger(__name__)
P = "switchyard_"


def active_release_metrics() -> Iterator[Metric]:
    phase = GaugeMetricFamily(
        P + "release_phase",
        "1 for the current phase of each active release.",
        labels=["cluster", "model", "release", "phase"],
    )
    weight = GaugeMetricFamily(
        P + "release_candidate_weight_ratio",
        "Share of the model's traffic the candidate of each active release gets (0-1).",
        labels=["cluster", "model", "release"],
    )
    for r in selectors.active_releases():
        names = [r["cluster__name"], r["model__name"], str(r["id"])]
        phase.add_metric([*names, r["phase"]], 1)
        weight.add_metric(names, r["candidate_weight"] / 100.0)
    yield from (phase, weight)


def release_outcome_metrics() -> Iterator[Metric]:
    finished = CounterMetricFamily(
        P + "releases_finished",
        "Releases finished, per final phase (SUCCEEDED, ROLLED_BACK, FAILED).",
        labels=["cluster", "model", "phase"],
    )
    rollbacks = CounterMetricFamily(
        P + "release_rollbacks", "Releases rolled back.", labels=["cluster", "model"]
    )
    for row in selectors.finished_release_counts():
        finished.add_metric([row["cluster__name"], row["model__name"], row["phase"]], row["n"])
        if row["phase"] == "ROLLED_BACK":
            rollbacks.add_metric([row["cluster__name"], row["model__name"]], row["n"])
    analyses = CounterMetricFamily(
        P + "release_analyses",
        "Interval analyses of releases (the automatic gates), per result.",
        labels=["cluster", "model", "result"],
    )
    for row in selectors.analysis_counts():
        labels = [row["release__cluster__name"], row["release__model__name"]]
        analyses.add_metric([*labels, str(row["result"] or "unknown")], row["n"])
    yield from (finished, rollbacks, analyses)


def deployment_metrics() -> Iterator[Metric]:
    total = CounterMetricFamily(
        P + "deployments",
        "Deployments (fleet pushes and unloads) per kind and status.",
        labels=["cluster", "kind", "status"],
    )
    for row in selectors.deployment_counts():
        total.add_metric([row["cluster__name"], row["kind"], row["status"]], row["n"])
    durations = HistogramMetricFamily(
        P + "deployment_duration_seconds",
        "Wall time of finished deployments, from start to the last node's outcome.",
        labels=["cluster"],
    )
    for h in selectors.deployment_durations():
        buckets = [(floatToGoString(b), n) for b, n in h.buckets] + [("+Inf", h.count)]
        durations.add_metric([h.cluster], buckets, h.sum_s)
    drift = CounterMetricFamily(
        P + "reconcile_drift_events",
        "What reconcile found and did: node_down, node_up, missing, unexpected, repair_failed.",
        labels=["cluster", "kind"],
    )
    for row in selectors.drift_counts():
        drift.add_metric([row["cluster__name"], row["kind"]], row["n"])
    yield from (total, durations, drift)


def node_metrics() -> Iterator[Metric]:
    up = GaugeMetricFamily(
        P + "node_up", "1 when reconcile last reached the node, else 0.", labels=["cluster", "node"]
    )
    seen = GaugeMetricFamily(
        P + "node_last_seen_timestamp_seconds",
        "When reconcile last reached the node (Unix time).",
        labels=["cluster", "node"],
    )
    for row in selectors.node_states():
        labels = [row["cluster__name"], row["name"]]
        up.add_metric(labels, 1 if row["health"] == "up" else 0)
        if row["last_seen_at"] is not None:
            seen.add_metric(labels, row["last_seen_at"].timestamp())
    yield from (up, seen)


def alert_metrics() -> Iterator[Metric]:
    alerts = GaugeMetricFamily(
        P + "alerts_open",
        "Open health alerts (docs/HEALTH.md) per kind, severity and state.",
        labels=["kind", "severity", "state"],
    )
    for row in selectors.open_alert_counts():
        alerts.add_metric([row["kind"], row["severity"], row["state"]], row["n"])
    yield alerts


def redis_metrics(now: float) -> Iterator[Metric]:
    """The collector's health and Celery queue lengths; nothing when Redis is away."""
    try:
        status = collector_status_read()
        queues = _queue_lengths()
    except redis.RedisError as exc:
        log.warning("metrics: Redis unreachable: %s", exc)
        yield _redis_up(0)
        return
    yield _redis_up(1)
    yield from collector_metrics(status, now)
    length = GaugeMetricFamily(
        P + "celery_queue_length", "Tasks waiting in each Celery queue.", labels=["queue"]
    )
    for queue, n in queues.items():
        length.add_metric([queue], n)
    yield length


def db_pool_metrics() -> Iterator[Metric]:
    """Each web process's database pool (controlplane/db_pool.py); nothing when Redis is
    away (switchyard_redis_up says so)."""
    try:
        pools = published_stats()
    except redis.RedisError as exc:
        log.warning("metrics: pool stats unreadable: %s", exc)
        return
    yield from pool_families(pools)


_POOL_GAUGES = (
    ("max_size", "db_pool_max_connections", "The most connections this web process's pool opens."),
    ("size", "db_pool_connections", "Connections the pool holds open (checked out or idle)."),
    ("checked_out", "db_pool_checked_out", "Connections checked out of the pool right now."),
    ("waiting", "db_pool_waiting", "Requests waiting for a free connection right now."),
)
_POOL_COUNTERS = (
    ("waits", "db_pool_waits", "Requests that had to wait for a connection."),
    ("wait_s", "db_pool_wait_seconds", "Seconds requests spent waiting for a connection."),
    ("timeouts", "db_pool_timeouts", "Requests that got no connection in time (answered 503)."),
)


def pool_families(pools: list[PoolStats]) -> Iterator[Metric]:
    for field, name, text in _POOL_GAUGES:
        family = GaugeMetricFamily(P + name, text, labels=["process"])
        for pool in pools:
            family.add_metric([pool.process], getattr(pool, field))
        yield family
    for field, name, text in _POOL_COUNTERS:
        family = CounterMetricFamily(P + name, text, labels=["process"])
        for pool in pools:
            family.add_metric([pool.process], getattr(pool, field))
        yield family


def collector_metrics(status: CollectorStatus, now: float) -> Iterator[Metric]:
    last = GaugeMetricFamily(
        P + "collector_last_tick_timestamp_seconds", "When the collector last ticked (Unix time)."
    )
    lag = GaugeMetricFamily(P + "collector_lag_seconds", "Seconds since the collector last ticked.")
    took = GaugeMetricFamily(
        P + "collector_tick_duration_seconds", "How long the collector's last tick took."
    )
    if status.last_tick_at is not None:
        last.add_metric([], status.last_tick_at)
        lag.add_metric([], max(0.0, now - status.last_tick_at))
        took.add_metric([], status.last_tick_s or 0.0)
    errors = CounterMetricFamily(
        P + "collector_scrape_errors",
        "Node scrapes that failed (no answer or unreadable metrics).",
        labels=["cluster", "node"],
    )
    for (cluster, node), n in sorted(status.scrape_errors.items()):
        errors.add_metric([cluster, node], n)
    dead = CounterMetricFamily(
        P + "collector_rollups_dead_lettered",
        "Rollup rows PostgreSQL refused for what they hold (logged, never written).",
        value=status.rollups_dead_lettered,
    )
    yield from (last, lag, took, errors, dead)


def _queue_lengths() -> dict[str, int]:
    client = redis_pool.client(settings.CELERY_BROKER_URL)
    try:
        return {q: int(client.llen(q)) for q in settings.SWITCHYARD_METRICS_QUEUES}
    finally:
        client.close()


def _redis_up(value: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(
        P + "redis_up",
        "1 when /metrics could read Redis (collector status, queue lengths), else 0.",
        value=value,
    )


def _database_up(value: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(
        P + "database_up",
        "1 when /metrics could read PostgreSQL (releases, deployments, nodes, alerts), else 0.",
        value=value,
    )


class SwitchyardCollector:
    """A prometheus_client collector that reads everything afresh on each scrape."""

    def collect(self) -> Iterator[Metric]:
        # The pools first, read without a connection: they are what to look at when the
        # web gets none (the rows after wait for one, up to the pool's timeout).
        yield from db_pool_metrics()
        try:
            rows = [
                *active_release_metrics(),
                *release_outcome_metrics(),
                *deployment_metrics(),
                *node_metrics(),
                *alert_metrics(),
            ]
        except DatabaseError as exc:
            log.warning("metrics: PostgreSQL unreadable: %s", exc)
            yield _database_up(0)
        else:
            yield _database_up(1)
            yield from rows
        yield from redis_metrics(time.time())


def render() -> bytes:
    """The whole exposition, in Prometheus' text format 0.0.4 (what Prometheus 2.x reads)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SwitchyardCollector())
    return generate_latest(registry)
