"""System health: the database, Redis and a Celery worker on every lane, each with a reason."""

from dataclasses import asdict, dataclass

import redis
from django.conf import settings
from django.db import connection

from controlplane.celery import app as celery_app
from controlplane.queues import LANES, lane_queue


@dataclass(frozen=True)
class Check:
    name: str
    is_ok: bool
    detail: str


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "down"; the text says why
        return Check("database", False, f"PostgreSQL is not reachable: {exc}".strip())
    return Check("database", True, f"PostgreSQL {connection.settings_dict.get('NAME')}")


def check_redis() -> Check:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError as exc:
        return Check("redis", False, f"Redis is not reachable at {settings.REDIS_URL}: {exc}")
    finally:
        client.close()
    return Check("redis", True, "Redis answers")


def check_worker(*, redis_ok: bool = True) -> Check:
    """Every lane (controlplane/queues.py) served by at least one worker that answers: a lane
    nobody serves never runs its tasks (release ticks, pushes, benchmarks)."""
    if not redis_ok:
        return Check("worker", False, "Cannot ask Celery workers: the broker (Redis) is down")
    timeout = settings.HEALTH_WORKER_PING_TIMEOUT_S
    try:
        replies = celery_app.control.inspect(timeout=timeout).active_queues() or {}
    except Exception as exc:  # broker errors surface as many types
        return Check("worker", False, f"Celery ping failed: {exc}")
    if not replies:
        return Check("worker", False, f"No Celery worker answered within {timeout:g} s")
    base = celery_app.conf.task_default_queue
    served = {
        lane: sorted(
            worker
            for worker, queues in replies.items()
            if lane_queue(base, lane) in {q.get("name") for q in queues or []}
        )
        for lane in LANES
    }
    detail = "; ".join(f"{lane} lane: {', '.join(w) or 'none'}" for lane, w in served.items())
    missing = [f"{lane} ({lane_queue(base, lane)})" for lane, w in served.items() if not w]
    if missing:
        return Check("worker", False, f"No worker serves the {', '.join(missing)} lane; {detail}")
    return Check("worker", True, f"{len(replies)} worker(s); {detail}")


def system_health() -> dict:
    """{"status": "ok"|"unhealthy", "checks": {name: {"ok", "detail"}}}; never raises."""
    database, cache = check_database(), check_redis()
    worker = check_worker(redis_ok=cache.is_ok)
    checks = [database, cache, worker]
    return {
        "status": "ok" if all(c.is_ok for c in checks) else "unhealthy",
        "checks": {c.name: {k: v for k, v in asdict(c).items() if k != "name"} for c in checks},
    }
