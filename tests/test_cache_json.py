"""The shared cache holds JSON only (audit/cache_json.py): a pickle planted in Redis under a
key the home page reads is never run, and every value the product caches comes back as it
was written."""

import os
import pickle
from dataclasses import asdict
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from django.core.cache.backends.redis import RedisSerializer

from audit.cache_json import JsonSerializer
from console.cluster_views import _unrouted_from_cache
from console.health import HEALTH_CACHE_KEY, check_redis, system_health
from releases.unrouted import UnroutedMeasure


class MakesAFolder:
    """A pickle that, once unpickled, creates `path` (standing in for any code)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.makedirs, (self.path,))


def test_the_cache_is_configured_with_the_json_serializer():
    assert cache._cache._serializer.__class__ is JsonSerializer
    assert settings.CELERY_ACCEPT_CONTENT == ["json"]
    assert settings.CELERY_RESULT_ACCEPT_CONTENT == ["json"]
    assert settings.CHANNEL_LAYERS["default"]["CONFIG"]["serializer_format"] == "msgpack"


@pytest.mark.parametrize(
    "value",
    [0, 7, -3, True, None, 1.5, "text", [1, "a", None], {"a": [1, {"b": False}]}, [], {}],
)
def test_json_values_round_trip(value):
    serializer = JsonSerializer()
    back = serializer.loads(_as_stored(serializer.dumps(value)))
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize(
    "value",
    [
        (1, 2),
        {1, 2},
        datetime(2026, 1, 1, tzinfo=UTC),
        Decimal("1.5"),
        UnroutedMeasure.of(10, 5),
        {1: "int key"},
        [("nested", "tuple")],
        b"bytes",
    ],
)
def test_values_json_would_change_are_refused_when_written(value):
    with pytest.raises(TypeError):
        JsonSerializer().dumps(value)


def _as_stored(dumped) -> bytes:
    """What redis-py hands back for what was written (ints are sent as their digits)."""
    return str(dumped).encode() if type(dumped) is int else dumped


def test_what_the_product_caches_round_trips(db):
    health = system_health()
    measure = UnroutedMeasure.of(40, 30, window_start=1.0, window_end=61.0, why="")
    rows = [["risk_score", asdict(measure)]]
    ticket = {"user_id": 5, "token_id": None}
    samples = [{"at": 1.5, "requests": 3, "errors": 0, "error_pct": 0.0, "tripped": False}]
    for key, value in {"health": health, "rows": rows, "ticket": ticket, "g": samples}.items():
        cache.set(f"test-cache-json:{key}", value, 30)
        assert cache.get(f"test-cache-json:{key}") == value
        cache.delete(f"test-cache-json:{key}")
    assert _unrouted_from_cache(rows) == [("risk_score", measure)]
    assert _unrouted_from_cache([["m", {"not": "a measure"}]]) is None


def test_a_pickle_planted_under_the_home_pages_key_is_never_run(
    client, make_user, tmp_path, settings
):
    settings.SWITCHYARD_HEALTH_CACHE_S = 30  # the page reads the shared copy and stores its own
    marker = tmp_path / "ran"
    payload = pickle.dumps(MakesAFolder(str(marker)))
    RedisSerializer().loads(payload)  # Django's default serializer would run it
    assert marker.is_dir()
    marker.rmdir()

    raw = redis.Redis.from_url(settings.REDIS_URL)
    key = cache.make_key(HEALTH_CACHE_KEY)
    try:
        raw.set(key, payload, ex=60)
        client.force_login(make_user("cache-reader"))
        page = client.get("/")
        assert page.status_code == 200
        assert b'data-testid="health-status"' in page.content
        assert not marker.exists()
        assert cache.get(HEALTH_CACHE_KEY)["value"]["checks"]["database"]["is_ok"] is True
    finally:
        raw.delete(key)
        raw.close()


def test_the_health_card_names_redis_without_its_url_or_password(settings):
    settings.REDIS_URL = "redis://:kit-password@127.0.0.1:1/0"  # nothing listens on port 1
    check = check_redis()
    assert not check.is_ok
    assert "Redis is not reachable" in check.detail
    assert "kit-password" not in check.detail and "127.0.0.1:1" not in check.detail
