"""One Redis connection pool per server and process, however many clients ask.

redis-py opens a pool per client made with `Redis.from_url`, and Django's cache makes a
client per request context under ASGI: each page paid a new TCP connection (and redis-py's
handshake) for every Redis read, about a tenth of the web's CPU with 50 users. Every Redis
client of the control plane comes from here (`client()`), and the cache's pools too
(`SharedConnectionPool` as its `pool_class`), so connections are kept and reused.

Keys the control plane writes to Redis itself (outside the cache) start with the install's
cache key prefix (`SWITCHYARD_CACHE_KEY_PREFIX`, "switchyard" by default: `key()`), so two
installs that share a Redis database never read each other's counters.

redis-py's pools are thread-safe, drop connections inherited across a fork, and check a
connection before lending it (a connection that a restarted Redis closed is reopened).
"""

from __future__ import annotations

import threading

import redis
from django.conf import settings

_pools: dict[tuple, redis.ConnectionPool] = {}
_lock = threading.Lock()


class SharedConnectionPool(redis.ConnectionPool):
    """A ConnectionPool whose `from_url` hands out the one pool of this process for the same
    URL and options."""

    @classmethod
    def from_url(cls, url: str, **kwargs):
        key = (url, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        with _lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = super().from_url(url, **kwargs)
            return pool


def client(url: str | None = None, *, timeout_s: float = 1.0) -> redis.Redis:
    """A client of `url` (settings.REDIS_URL by default) on the process's shared pool, with
    `timeout_s` to connect and per command; a command that meets a connection Redis dropped
    is sent once more on a fresh one."""
    pool = SharedConnectionPool.from_url(
        url or settings.REDIS_URL,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry_on_error=[redis.ConnectionError],
    )
    return redis.Redis(connection_pool=pool)


def key(*parts: str) -> str:
    """A Redis key of this install: its cache key prefix, then `parts`, joined by ':'."""
    return ":".join([settings.CACHES["default"].get("KEY_PREFIX") or "switchyard", *parts])
