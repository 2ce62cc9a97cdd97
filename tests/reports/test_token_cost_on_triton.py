"""Cost per 1,000 output tokens from a real Triton node: the streaming example counts its
tokens (`vllm:generation_tokens_total`), the real collector files them in the minute
rollups beside the requests, and the cost report divides the version's serving cost by
them (reports/selectors.py). The collector's ticks are given explicit times, as in
tests/reports/conftest.py, so the rollups land in known minutes."""

import asyncio
import json
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from integrations.triton.local import start_cluster
from models_registry.models import Model, Team
from reports import selectors
from reports.costing import cost_per_1k
from telemetry.collector import Collector, ScrapeSource, Target
from telemetry.services import rollups_write
from tests.conftest import in_thread, session_node_key
from tests.reports.conftest import PRICE
from tests.telemetry.live import db_cluster, load_example

pytestmark = [pytest.mark.triton, pytest.mark.django_db]

STREAMS, TOKENS = 20, 11


def _stream(node, name: str, i: int) -> None:
    body = json.dumps({"PROMPT": f"ticket {i}", "MAX_TOKENS": TOKENS}).encode()
    url = f"{node.http_url}/v2/models/{name}/generate_stream"
    request = urllib.request.Request(url, data=body, method="POST")  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
        events = [e for e in answer.read().decode().split("\n\n") if e]
    assert len(events) == TOKENS


@pytest.fixture
def scraped_streams(tmp_path):
    """`tokens_lab` (token_stream v1) streaming STREAMS streams of TOKENS tokens in minute
    1 of a node scraped by the real collector; (first minute, rollup rows, node name)."""
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)
    t0 = start.timestamp()
    with start_cluster(1, tmp_path, metrics_interval_ms=1000, node_key=session_node_key()) as own:
        node = own.nodes[0]
        load_example([node], example="token_stream", name="tokens_lab", versions=[1])
        rows = []

        async def keep(finished) -> None:
            rows.extend(finished)

        source = ScrapeSource([Target("tok-lab", node.name, node.metrics_url)])
        collector = Collector([source], store=keep)

        def tick(at: float) -> None:
            in_thread(asyncio.run, collector.tick(at))

        tick(t0 + 30)
        for i in range(STREAMS):
            _stream(node, "tokens_lab", i)
        time.sleep(1.2)  # the node's metrics are refreshed every second
        tick(t0 + 90)
        tick(t0 + 150)
        in_thread(asyncio.run, collector.flush(None))
    return start, rows, node.name


def test_a_streaming_versions_cost_per_1k_output_tokens(scraped_streams, client, make_user):
    start, rows, node_name = scraped_streams
    cluster = db_cluster("tok-lab", [], node_hourly_cost=PRICE)
    cluster.nodes.create(name=node_name, http_url="http://127.0.0.1:9")
    assert rollups_write(rows=rows) == len(rows)
    counted = [r for r in rows if r.model == "tokens_lab"]
    assert sum(r.output_tokens for r in counted) == STREAMS * TOKENS, counted
    Model.objects.create(name="tokens_lab", team=Team.objects.create(name="gen"))

    report = selectors.cost_report(
        since=start, until=start + timedelta(minutes=3), group_by="version"
    )
    row = next(r for r in report["rows"] if r["model"] == "tokens_lab")
    assert row["output_tokens"] == STREAMS * TOKENS and row["successes"] == STREAMS
    assert row["serving_cost"] > 0
    # What the version's node time cost (ticks, before rounding to cents) per 1k tokens.
    lines = selectors.range_lines(start, start + timedelta(minutes=3))
    ticks = sum(line.cost_ticks for key, line in lines.items() if key[3] == "tokens_lab")
    assert row["cost_per_1k_tokens"] == cost_per_1k(ticks, STREAMS * TOKENS) > 0
    per_request = row["cost_per_1k"] / TOKENS  # 11 tokens a request
    assert abs(row["cost_per_1k_tokens"] - per_request) <= Decimal("0.0001"), row

    # The model's Cost tab shows the column with the figure.
    client.force_login(make_user("mia", role="managers"))
    page = client.get("/models/tokens_lab/cost/", {"range": "24h"}).content.decode()
    table = page.split('data-testid="model-cost-versions"')[1].split("</table>")[0]
    assert 'data-testid="per-1k-tokens"' in table
    assert f'{STREAMS * TOKENS} output tokens">{row["cost_per_1k_tokens"]}' in table, table
