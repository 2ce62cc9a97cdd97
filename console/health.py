"""System health: the database, Redis and a Celery worker on every lane, each with a reason.

A check's detail names what failed, never a URL or a credential (REDIS_URL may hold a
password); the full error goes to the log. `system_health_shared` answers from a result a
few seconds old (SWITCHYARD_HEALTH_CACHE_S): anonymous /healthz calls and every home page of
every web process share one check (it waits up to a second for the Celery workers).
"""

import logging
from dataclasses import asdict, dataclass

import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from controlplane.celery import app as celery_app
from controlplane.queues import LANES, lane_queue
from core import redis_pool
from core.shared import shared_value

logger = logging.getLogger(__name__)
HEALTH_CACHE_KEY = "console:system-health"


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
    except Exception as exc:  # any driver error means "down"; the log says why
        logger.warning("health: PostgreSQL is not reachable: %s", exc)
        return Check("database", False, f"PostgreSQL is not reachable ({type(exc).__name__})")
    return Check("database", True, f"PostgreSQL {connection.settings_dict.get('NAME')}")


def check_redis() -> Check:
    client = redis_pool.client()
    try:
        client.ping()
    except redis.RedisError as exc:  # the URL may hold a password: the log has the error
        logger.warning("health: Redis is not reachable: %s", exc)
        return Check("redis", False, f"Redis is not reachable ({type(exc).__name__})")
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
    except Exception as exc:  # broker errors surface as many types (and may name its URL)
        logger.warning("health: Celery ping failed: %s", exc)
        return Check("worker", False, f"Celery ping failed ({type(exc).__name__})")
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
    """{"status": "ok"|"unhealthy", "checked_at", "checks": {name: {"is_ok", "detail"}}};
    never raises."""
    database, cache = check_database(), check_redis()
    worker = check_worker(redis_ok=cache.is_ok)
    checks = [database, cache, worker]
    return {
        "status": "ok" if all(c.is_ok for c in checks) else "unhealthy",
        "checked_at": timezone.now().isoformat(),
        "checks": {c.name: {k: v for k, v in asdict(c).items() if k != "name"} for c in checks},
    }


def system_health_shared() -> dict:
    """system_health() at most SWITCHYARD_HEALTH_CACHE_S old, checked by one caller at a time
    for every process (core/shared.py); checked here when Redis is out of reach."""
    return shared_value(HEALTH_CACHE_KEY, system_health, fresh_s=settings.SWITCHYARD_HEALTH_CACHE_S)
