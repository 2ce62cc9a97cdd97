"""A real Triton node with real traffic scraped by the real collector, for cost tests."""

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from integrations.triton.local import start_cluster
from telemetry.collector import Collector, ScrapeSource, Target
from telemetry.services import rollups_write
from tests.conftest import in_thread, session_node_key
from tests.telemetry.live import db_cluster, load_example, traffic

# 60 a minute: a few seconds of a small CPU model's traffic then cost whole cents.
PRICE = Decimal("3600.0000")


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """Minutes 0-3: model `busy` at 40 rps and `half` at 20 rps, `ghost` loaded without
    traffic; minutes 4-5: the node is dead. Returns (first minute, rollup rows, names)."""
    suffix = uuid.uuid4().hex[:6]
    names = {k: f"{k}_{suffix}" for k in ("busy", "half", "ghost")}
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=8)
    t0 = start.timestamp()
    with start_cluster(
        1, tmp_path_factory.mktemp("cost"), metrics_interval_ms=1000, node_key=session_node_key()
    ) as own:
        node = own.nodes[0]
        configs = {
            k: load_example([node], example="risk_score", name=n, versions=[1])
            for k, n in names.items()
        }
        rows = []

        async def keep(finished) -> None:
            rows.extend(finished)

        source = ScrapeSource([Target("cost-lab", node.name, node.metrics_url)])
        collector = Collector([source], store=keep)

        def tick(at: float) -> None:
            in_thread(asyncio.run, collector.tick(at))

        tick(t0 + 1)
        with (
            traffic([node], names["busy"], configs["busy"], version="1", rps=40),
            traffic([node], names["half"], configs["half"], version="1", rps=20),
        ):
            for minute in range(4):
                for second in (20, 40, 59):
                    time.sleep(1.0)
                    tick(t0 + minute * 60 + second)
        own.kill(node)
        for minute in (4, 5):
            tick(t0 + minute * 60 + 30)
        in_thread(asyncio.run, collector.flush(None))
    return start, rows, names, node.name


def write_scraped(scraped):
    """The cluster, its node and the scraped rollups in the database; (start, names)."""
    start, rows, names, node_name = scraped
    cluster = db_cluster("cost-lab", [], node_hourly_cost=PRICE)
    cluster.nodes.create(name=node_name, http_url="http://127.0.0.1:9")
    assert rollups_write(rows=rows) == len(rows)
    return start, names
