"""The shared cache's serializer: JSON, never pickle (docs/SECURITY.md "The cache holds JSON").

Django's Redis cache unpickles what it reads by default, so whoever can write a key in Redis
could run code in every process that reads it. This serializer writes JSON and reads JSON
only. A value it cannot read back as it was written is refused when written (TypeError:
tuples, sets, datetimes, Decimals, dataclasses and querysets included; convert them at the
call site), and a stored value that is not JSON reads as a miss, never as an error.
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)

_SCALARS = (str, int, float, bool, type(None))


def _refuse_lossy(value: Any, path: str = "value") -> None:
    """TypeError unless `value` comes back from JSON equal and of the same types."""
    if isinstance(value, _SCALARS):
        return
    if type(value) is list:
        for index, item in enumerate(value):
            _refuse_lossy(item, f"{path}[{index}]")
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"{path}: cache keys of a dict must be str, not {type(key)}")
            _refuse_lossy(item, f"{path}[{key!r}]")
        return
    raise TypeError(f"{path}: {type(value).__name__} does not round-trip through JSON")


class JsonSerializer:
    """`CACHES[...]["OPTIONS"]["serializer"]` for django.core.cache.backends.redis.RedisCache."""

    def dumps(self, obj: Any) -> bytes | int:
        # Plain ints stay raw like Django's own serializer does, so incr() stays atomic.
        if type(obj) is int:
            return obj
        _refuse_lossy(obj)
        return json.dumps(obj, separators=(",", ":")).encode()

    def loads(self, data: bytes) -> Any:
        try:
            return int(data)
        except ValueError:
            pass
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError):
            # Not written by this serializer (an old pickle, or planted): read as a miss.
            log.warning("cache: a value that is not JSON was ignored (%d bytes)", len(data))
            return None
