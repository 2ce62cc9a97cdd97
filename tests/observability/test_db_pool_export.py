"""Each web process's pool as /metrics reads it from Redis (controlplane/db_pool.py): fresh
entries are reported per process, a stopped process's entry goes once it is stale."""

import time
import uuid

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controlplane import db_pool
from observability.exposition import pool_families


@pytest.fixture
def client(settings):
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"pool-{uuid.uuid4().hex[:8]}"}
    }
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.delete(db_pool.stats_key())
    client.close()


def _stats(process: str, checked_out: int) -> db_pool.PoolStats:
    return db_pool.PoolStats(
        process=process, max_size=10, size=4, checked_out=checked_out, waiting=0, waits=7,
        wait_s=1.5, timeouts=2,
    )  # fmt: skip


def test_fresh_entries_are_reported_and_stale_ones_removed(client):
    db_pool.publish(client, _stats("web-a:1", 3))
    db_pool.publish(client, _stats("web-b:2", 0))
    now = time.time()
    assert [s.process for s in db_pool.published_stats(client, now=now)] == ["web-a:1", "web-b:2"]

    later = now + db_pool.STALE_AFTER_S + 1  # neither published since: both stopped
    assert db_pool.published_stats(client, now=later) == []
    assert client.hlen(db_pool.stats_key()) == 0


class _Pools:
    def collect(self):
        yield from pool_families([_stats("web-a:1", 3), _stats("web-b:2", 0)])


def test_the_exposition_names_each_process():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Pools())
    text = generate_latest(registry).decode()
    found = {
        (s.name, s.labels["process"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert found[("switchyard_db_pool_checked_out", "web-a:1")] == 3
    assert found[("switchyard_db_pool_checked_out", "web-b:2")] == 0
    assert found[("switchyard_db_pool_max_connections", "web-a:1")] == 10
    assert found[("switchyard_db_pool_waits_total", "web-b:2")] == 7
    assert found[("switchyard_db_pool_wait_seconds_total", "web-a:1")] == 1.5
    assert found[("switchyard_db_pool_timeouts_total", "web-a:1")] == 2
