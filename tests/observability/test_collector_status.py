"""The collector process records its ticks and failed scrapes where /metrics can read them."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from deployments.models import TritonCluster, TritonNode
from integrations.triton.local import free_ports
from telemetry import status
from telemetry.runner import CollectorRunner


@pytest.mark.django_db(transaction=True)
def test_collector_runner_records_each_tick_and_counts_failed_scrapes(settings, client):
    client_redis = redis.Redis.from_url(settings.REDIS_URL)
    client_redis.delete(status.status_key(), status.errors_key())
    (port,) = free_ports(1)  # nothing listens there: every scrape fails
    cluster = TritonCluster.objects.create(name="edge", environment="staging")
    TritonNode.objects.create(
        cluster=cluster,
        name="gone",
        http_url=f"http://127.0.0.1:{port}",
        metrics_url=f"http://127.0.0.1:{port}/metrics",
    )
    try:
        runner = CollectorRunner(interval_s=0.2, timeout_s=0.5)
        # A thread of its own: browser tests leave an event loop running in the main thread.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, runner.run(asyncio.Event(), ticks=3)).result()
        recorded = status.collector_status_read()
        assert recorded.scrape_errors == {("edge", "gone"): 3}
        assert recorded.last_tick_at is not None and recorded.last_tick_s >= 0
        body = client.get("/metrics").content.decode()
        assert 'switchyard_collector_scrape_errors_total{cluster="edge",node="gone"} 3.0' in body
    finally:
        client_redis.delete(status.status_key(), status.errors_key())
        client_redis.close()
