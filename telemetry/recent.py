"""The collector's short buffer of recent live points, kept in Redis so that a live page
opens with the last minutes drawn (rollups hold whole minutes only, and the current minute
is written when it ends).

One sorted set per websocket group (score: the point's time), trimmed to the last
`TELEMETRY_RECENT_S` seconds on every write. Only what the charts draw is kept: model points
summed over a cluster's nodes and node points.
"""

from __future__ import annotations

import json

import redis
from django.conf import settings

from core import redis_pool


def _key(group: str) -> str:
    return redis_pool.key("telemetry", "recent", group)


def _client() -> redis.Redis:
    return redis_pool.client()


def _kept(payload: dict) -> bool:
    return payload.get("type") == "node" or (
        payload.get("type") == "point" and payload.get("node") == ""
    )


def recent_record(*, payloads: dict[str, list[dict]], now: float) -> None:
    """Add one tick's payloads per group; forget what is older than the buffer's span."""
    keep_s = settings.TELEMETRY_RECENT_S
    client = _client()
    try:
        pipe = client.pipeline(transaction=False)
        for group, points in payloads.items():
            members = {json.dumps(p, sort_keys=True): p["ts"] for p in points if _kept(p)}
            if not members:
                continue
            pipe.zadd(_key(group), members)
            pipe.zremrangebyscore(_key(group), "-inf", f"({now - keep_s}")
            pipe.expire(_key(group), int(keep_s) + 60)
        pipe.execute()
    finally:
        client.close()


def recent_points(*, group: str, since: float) -> list[dict]:
    """The group's buffered points from `since` (epoch seconds) on, oldest first;
    [] when Redis does not answer (the page then draws rollups only)."""
    client = _client()
    try:
        raw = client.zrangebyscore(_key(group), since, "+inf")
    except redis.RedisError:
        return []
    finally:
        client.close()
    return [json.loads(m) for m in raw]
