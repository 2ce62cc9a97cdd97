"""Writes of telemetry: per-minute rollups and their retention.

Rollups are measurements, not decisions by a person, so they leave no audit event.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import DataError, IntegrityError, connection, transaction
from django.utils import timezone

from deployments.models import TritonCluster
from telemetry.models import Rollup
from telemetry.rollups import RollupRow
from telemetry.status import rollups_dead_lettered_count

log = logging.getLogger(__name__)

# A minute written twice (a restarted collector) adds up instead of overwriting.
_UPSERT = """
INSERT INTO telemetry_rollup (
    cluster_id, node_name, model_name, version, minute, requests, successes, failures,
    request_us, queue_us, compute_us, p99_ms, cpu_util_avg, gpu_util_avg, samples,
    probe_requests, warmup_requests, smoke_requests, benchmark_requests, own_successes,
    split_inexact, output_tokens
) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (cluster_id, node_name, model_name, version, minute) DO UPDATE SET
    requests = telemetry_rollup.requests + EXCLUDED.requests,
    successes = telemetry_rollup.successes + EXCLUDED.successes,
    failures = telemetry_rollup.failures + EXCLUDED.failures,
    request_us = telemetry_rollup.request_us + EXCLUDED.request_us,
    queue_us = telemetry_rollup.queue_us + EXCLUDED.queue_us,
    compute_us = telemetry_rollup.compute_us + EXCLUDED.compute_us,
    samples = telemetry_rollup.samples + EXCLUDED.samples,
    probe_requests = telemetry_rollup.probe_requests + EXCLUDED.probe_requests,
    warmup_requests = telemetry_rollup.warmup_requests + EXCLUDED.warmup_requests,
    smoke_requests = telemetry_rollup.smoke_requests + EXCLUDED.smoke_requests,
    benchmark_requests = telemetry_rollup.benchmark_requests + EXCLUDED.benchmark_requests,
    own_successes = telemetry_rollup.own_successes + EXCLUDED.own_successes,
    output_tokens = telemetry_rollup.output_tokens + EXCLUDED.output_tokens,
    split_inexact = telemetry_rollup.split_inexact OR EXCLUDED.split_inexact,
    p99_ms = GREATEST(telemetry_rollup.p99_ms, EXCLUDED.p99_ms),
    cpu_util_avg = COALESCE(EXCLUDED.cpu_util_avg, telemetry_rollup.cpu_util_avg),
    gpu_util_avg = COALESCE(EXCLUDED.gpu_util_avg, telemetry_rollup.gpu_util_avg)
"""


def _values(row: RollupRow, cluster_id: int) -> tuple:
    minute = datetime.fromtimestamp(row.minute, tz=UTC)
    return (
        cluster_id,
        row.node,
        row.model,
        row.version,
        minute,
        round(row.requests),
        round(row.successes),
        round(row.failures),
        row.request_us,
        row.queue_us,
        row.compute_us,
        row.p99_ms,
        row.cpu_util_avg,
        row.gpu_util_avg,
        row.samples,
        round(row.probe_requests),
        round(row.warmup_requests),
        round(row.smoke_requests),
        round(row.benchmark_requests),
        round(row.own_successes),
        row.split_inexact,
        round(row.output_tokens),
    )


def rollups_write(*, rows: list[RollupRow]) -> int:
    """Add finished minutes to the rollup table (a minute written twice adds up); the count.

    Rows of clusters that no longer exist are skipped. A row PostgreSQL refuses for what it
    holds (DataError, IntegrityError: e.g. a name longer than its column) can never be
    written: it is dead-lettered (a log line and the collector's dead-letter counter on
    /metrics) and the others are written. Any other failure (the database is away) raises
    with nothing written, so the caller keeps the rows for its next try.
    """
    names = {row.cluster for row in rows}
    ids = dict(TritonCluster.objects.filter(name__in=names).values_list("name", "id"))
    values = [_values(row, ids[row.cluster]) for row in rows if row.cluster in ids]
    if not values:
        return 0
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(_UPSERT, values)
        return len(values)
    except (DataError, IntegrityError):
        pass
    return _write_one_by_one(values)


def _write_one_by_one(values: list[tuple]) -> int:
    """Each row in a savepoint of its own; refused rows dead-lettered; the count written."""
    written, dead = 0, []
    with transaction.atomic(), connection.cursor() as cursor:
        for row in values:
            try:
                with transaction.atomic():
                    cursor.execute(_UPSERT, row)
                written += 1
            except (DataError, IntegrityError) as exc:
                dead.append(row)
                log.error(
                    "rollup row dead-lettered (it can never be written): cluster id %s, "
                    "node %r, model %r, version %r, minute %s: %s",
                    *row[:5],
                    str(exc).strip().splitlines()[0],
                )
    if dead:
        try:
            rollups_dead_lettered_count(len(dead))
        except Exception:  # the count is for /metrics; the log line above already says it
            log.exception("counting dead-lettered rollup rows failed")
    return written


def rollups_cleanup(*, now: datetime | None = None) -> int:
    """Delete rollups older than TELEMETRY_ROLLUP_RETENTION_DAYS; how many went."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.TELEMETRY_ROLLUP_RETENTION_DAYS)
    deleted, _ = Rollup.objects.filter(minute__lt=cutoff).delete()
    return deleted
