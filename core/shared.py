"""Work shared by every user and process: a value computed at most once per window.

`shared_value(key, compute, fresh_s=...)` keeps `{"at": epoch seconds, "value": ...}` in the
shared cache (Redis, JSON only: audit/cache_json.py) for `keep_s`, longer than the window.
While the value is fresh every caller reads it. Once it is stale, the first caller takes a
lock (`cache.add`) and computes while every other caller reads the last value; only when
there is no value at all do the others wait for the one computing (up to `wait_s`), then
compute themselves. A page viewed by fifty users costs one computation per window, not fifty.
While Redis is out of reach each caller computes its own value (the page still answers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import redis
from django.core.cache import cache

logger = logging.getLogger(__name__)
_POLL_S = 0.05


def _read(key: str) -> dict | None:
    """The stored entry, or None when absent, not of the entry's shape or Redis is down."""
    try:
        entry = cache.get(key)
    except redis.RedisError:
        return None
    if isinstance(entry, dict) and isinstance(entry.get("at"), int | float) and "value" in entry:
        return entry
    return None


def _compute_and_store(key: str, compute: Callable[[], Any], keep_s: float) -> Any:
    value = compute()
    try:
        cache.set(key, {"at": time.time(), "value": value}, keep_s)
    except redis.RedisError:
        logger.warning("shared value %s: not stored (Redis is down)", key)
    return value


def shared_value(
    key: str,
    compute: Callable[[], Any],
    *,
    fresh_s: float,
    keep_s: float = 300.0,
    lock_s: float = 30.0,
    wait_s: float = 5.0,
) -> Any:
    """`compute()`'s value, at most `fresh_s` old when one caller at a time asks, and computed
    by one caller at a time across every process (others read the last value meanwhile).

    `compute` must return what the cache stores as JSON (dicts, lists, str, numbers, None);
    `keep_s` is how long a stale value may still be served while a new one is computed;
    `lock_s` bounds one computation (a crashed computer's lock expires after it)."""
    entry = _read(key)
    if entry is not None and time.time() - entry["at"] < fresh_s:
        return entry["value"]
    lock = f"{key}:computing"
    try:
        is_mine = cache.add(lock, 1, lock_s)
    except redis.RedisError:
        return compute()  # no shared cache: every caller computes on its own
    if is_mine:
        try:
            # The one who held the lock before may have stored between our read and our lock.
            entry = _read(key)
            if entry is not None and time.time() - entry["at"] < fresh_s:
                return entry["value"]
            return _compute_and_store(key, compute, max(keep_s, fresh_s))
        finally:
            try:
                cache.delete(lock)
            except redis.RedisError:
                pass  # the lock expires after lock_s
    if entry is not None:
        return entry["value"]  # stale, while another caller computes the next one
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(_POLL_S)
        entry = _read(key)
        if entry is not None:
            return entry["value"]
    return compute()  # the one computing takes too long: answer this caller anyway
