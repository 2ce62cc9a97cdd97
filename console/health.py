"""System health: the database, Redis and at least one Celery worker, each with a reason."""

from dataclasses import asdict, dataclass

import redis
from django.conf import settings
from django.db import connection

from controlplane.celery import app as celery_app


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
    if not redis_ok:
        return Check("worker", False, "Cannot ask Celery workers: the broker (Redis) is down")
    timeout = settings.HEALTH_WORKER_PING_TIMEOUT_S
    try:
        replies = celery_app.control.ping(timeout=timeout)
    except Exception as exc:  # broker errors surface as many types
        return Check("worker", False, f"Celery ping failed: {exc}")
    names = sorted(name for reply in replies for name in reply)
    if not names:
        return Check("worker", False, f"No Celery worker answered within {timeout:g} s")
    return Check("worker", True, f"{len(names)} worker(s): {', '.join(names)}")


def system_health() -> dict:
    """{"status": "ok"|"unhealthy", "checks": {name: {"ok", "detail"}}}; never raises."""
    database, cache = check_database(), check_redis()
    worker = check_worker(redis_ok=cache.is_ok)
    checks = [database, cache, worker]
    return {
        "status": "ok" if all(c.is_ok for c in checks) else "unhealthy",
        "checks": {c.name: {k: v for k, v in asdict(c).items() if k != "name"} for c in checks},
    }
