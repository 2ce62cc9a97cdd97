"""The collector's own health, kept in Redis so that any web process can report it.

The collector runs in its own process; after each tick it records when it ticked and adds
that tick's failed scrapes per node. `/metrics` (observability) reads them back.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import redis

from core import redis_pool


def status_key() -> str:
    return redis_pool.key("collector", "status")


def errors_key() -> str:
    return redis_pool.key("collector", "scrape_errors")


# A node name and its cluster joined by this in the errors hash (names never contain it).
SEPARATOR = "\x1f"


@dataclass(frozen=True)
class CollectorStatus:
    last_tick_at: float | None
    last_tick_s: float | None
    scrape_errors: dict[tuple[str, str], int]
    rollups_dead_lettered: int = 0


def _client() -> redis.Redis:
    return redis_pool.client()


def collector_status_record(*, at: float, took_s: float, failed: list[tuple[str, str]]) -> None:
    """Record one tick: its time, its duration and one more error per (cluster, node) failed."""
    client = _client()
    try:
        pipe = client.pipeline(transaction=False)
        pipe.hset(status_key(), mapping={"last_tick_at": at, "last_tick_s": took_s})
        for (cluster, node), n in Counter(failed).items():
            pipe.hincrby(errors_key(), f"{cluster}{SEPARATOR}{node}", n)
        pipe.execute()
    finally:
        client.close()


def rollups_dead_lettered_count(n: int) -> None:
    """Count `n` more rollup rows that could never be written (telemetry.services)."""
    client = _client()
    try:
        client.hincrby(status_key(), "rollups_dead_lettered", n)
    finally:
        client.close()


def collector_status_read() -> CollectorStatus:
    """What the collector last recorded (None times when it never ran); raises RedisError."""
    client = _client()
    try:
        status = client.hgetall(status_key())
        errors = client.hgetall(errors_key())
    finally:
        client.close()
    parsed: dict[tuple[str, str], int] = {}
    for key, value in errors.items():
        cluster, _, node = key.decode().partition(SEPARATOR)
        parsed[(cluster, node)] = int(value)
    at, took = status.get(b"last_tick_at"), status.get(b"last_tick_s")
    return CollectorStatus(
        last_tick_at=float(at) if at else None,
        last_tick_s=float(took) if took else None,
        scrape_errors=parsed,
        rollups_dead_lettered=int(status.get(b"rollups_dead_lettered") or 0),
    )
