"""The web processes' database pools: every connection goes back, and /metrics reports them.

Given back: plain HTTP requests run whole on a thread of controlplane/sync_http.py's pool,
which closes the response there (`request_finished` gives the connection back) however the
client behaves. For what stays on Django's ASGI handler (long-polls): under ASGI Django runs
a request's sync parts (middleware, the view) on a thread of the request's own and closes
that thread's connections (giving pooled ones back) when it sends `request_finished` at the
end of the request. A request whose client left is cancelled; when its sync part is still
running (waiting on a lock, on a slow query, on the pool itself) daphne kills the
application instance after `--application-close-timeout`, the handler never gets to
`request_finished`, and the thread's connection was never given back: psycopg's pool does
not reclaim it, so after `SWITCHYARD_DATABASE_POOL_SIZE` such requests every request waited
for a connection and failed (503) for as long as the process lived. `ConnectionsGivenBack`
wraps Django's ASGI app: the request's thread closes its connections as its last piece of
work, whatever ends the request (an answer, a client that left, a killed instance, an
error). Websocket consumers use `database_sync_to_async`, which closes around every call
already. A slow client holds none either: daphne reads a whole request body before the app
runs and buffers what the app sends, so the connection is given back as soon as the view's
answer is made.

Reported: every web process has its own psycopg pool (SWITCHYARD_DATABASE_POOL_SIZE), and a
scrape of /metrics reaches one of several processes, so no process can answer for the others
from its own memory. Each web process publishes its pool's numbers every PUBLISH_EVERY_S to
one Redis hash (a field per process, with the time it wrote it); /metrics reads the hash and
reports every process whose entry is fresher than STALE_AFTER_S, dropping the others (a
stopped process). Imports no app.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass

import redis
from asgiref.sync import SyncToAsync, ThreadSensitiveContext
from django.conf import settings
from django.db import connections

from core import redis_pool

log = logging.getLogger(__name__)

PUBLISH_EVERY_S = 1.0
STALE_AFTER_S = 10.0


@dataclass(frozen=True)
class PoolStats:
    """One process's pool: its cap, what it holds now, and its waits since it started."""

    process: str
    max_size: int
    size: int  # connections open (checked out or idle in the pool)
    checked_out: int
    waiting: int  # requests waiting for a connection right now
    waits: int  # requests that had to wait, since the process started
    wait_s: float  # their total wait
    timeouts: int  # requests that waited past the pool's timeout (answered 503)


def process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def local_stats() -> PoolStats | None:
    """This process's pool (None without one: SWITCHYARD_DATABASE_POOL_SIZE=0)."""
    pool = connections["default"].pool
    if pool is None:
        return None
    stats = pool.get_stats()
    # A pool no request has opened yet counts its min_size as open, none of them idle.
    size = 0 if pool.closed else stats.get("pool_size", 0)
    return PoolStats(
        process=process_name(),
        max_size=pool.max_size,
        size=size,
        checked_out=max(0, size - stats.get("pool_available", 0)),
        waiting=stats.get("requests_waiting", 0),
        waits=stats.get("requests_queued", 0),
        wait_s=stats.get("requests_wait_ms", 0) / 1000.0,
        timeouts=stats.get("requests_errors", 0),
    )


class ConnectionsGivenBack:
    """ASGI middleware around Django's HTTP app: the request's sync thread ends its work by
    closing its database connections, also when the request was cancelled or killed."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        # The outermost context is the request's (Django's own, nested, then changes nothing).
        async with ThreadSensitiveContext() as context:
            try:
                return await self.app(scope, receive, send)
            finally:
                executor = SyncToAsync.context_to_thread_executor.get(context)
                if executor is not None:  # runs after what the thread still has to finish
                    executor.submit(connections.close_all)


def connection_give_back() -> None:
    """Return this thread's connection to the pool now, outside a transaction only."""
    connection = connections["default"]
    if connection.pool is not None and not connection.in_atomic_block:
        connection.close()


def stats_key() -> str:
    return redis_pool.key("web-db-pools")


def _client() -> redis.Redis:
    return redis_pool.client(timeout_s=2)


def publish(client: redis.Redis, stats: PoolStats) -> None:
    entry = json.dumps({**asdict(stats), "at": time.time()})
    client.hset(stats_key(), stats.process, entry)


def published_stats(client: redis.Redis | None = None, *, now: float | None = None) -> list:
    """Every web process's pool as last published, fresh ones only (stale ones removed);
    this process's own read now, so the answer never lags for the process scraped."""
    client = client or _client()
    now = time.time() if now is None else now
    connection_give_back()  # a scrape does not count the connection it read rows with
    mine = local_stats()
    if mine is not None:
        publish(client, mine)
    found = []
    for field, raw in client.hgetall(stats_key()).items():
        entry = json.loads(raw)
        if now - entry.pop("at", 0) > STALE_AFTER_S:
            client.hdel(stats_key(), field)
            continue
        found.append(PoolStats(**entry))
    return sorted(found, key=lambda s: s.process)


def _publish_forever() -> None:
    client = _client()
    while True:
        try:
            stats = local_stats()
            if stats is not None:
                publish(client, stats)
        except Exception as exc:  # Redis or PostgreSQL away: try again next round
            log.debug("pool stats not published: %s", exc)
        time.sleep(PUBLISH_EVERY_S)


_started = threading.Lock()
_publisher: list[threading.Thread] = []


def publisher_start() -> None:
    """Start this web process's publishing thread once (a daemon: it ends with the process)."""
    with _started:
        if _publisher or not settings.DATABASES["default"].get("OPTIONS", {}).get("pool"):
            return
        thread = threading.Thread(target=_publish_forever, name="db-pool-stats", daemon=True)
        thread.start()
        _publisher.append(thread)
        atexit.register(_unpublish)


def _unpublish() -> None:
    """A process that stops takes its entry with it (a killed one's goes stale instead)."""
    try:
        client = _client()
        client.hdel(stats_key(), process_name())
        client.close()
    except redis.RedisError:
        pass
