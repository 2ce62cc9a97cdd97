"""Live pages open with the recent past (per-minute rollups plus the collector's buffer of
recent points in Redis) and go on live without a gap; an empty chart says why in words and
never draws an empty epoch axis. Real Triton nodes, Redis, collector, daphne, Chromium."""

import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from models_registry.services import model_create, team_create
from telemetry import events, recent, status
from telemetry.models import Rollup
from tests.browser.helpers import login
from tests.telemetry.live import db_cluster, load_example, running_collector, traffic, unload

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.django_db(transaction=True)]

HISTORY = "Number(document.getElementById('chart-rate').dataset.history || 0)"
POINTS = "Number(document.getElementById('chart-rate').dataset.points || 0)"


def _rollups(cluster, nodes, model: str, minutes: range) -> None:
    now = timezone.now().replace(second=0, microsecond=0)
    Rollup.objects.bulk_create(
        Rollup(
            cluster=cluster,
            node_name=node.name,
            model_name=model,
            version="1",
            minute=now - timedelta(minutes=m),
            requests=600,
            successes=600,
            request_us=600 * 3000,
            queue_us=600 * 100,
            compute_us=600 * 2500,
            p99_ms=7.0,
        )
        for m in minutes
        for node in nodes
    )


def _buffered(cluster: str, model: str, seconds: int) -> None:
    now = time.time()
    for ago in range(seconds, 0, -5):
        point = {
            "type": "point",
            "ts": now - ago,
            "cluster": cluster,
            "node": "",
            "model": model,
            "version": "1",
            "request_rate": 20.0,
            "success_rate": 100.0,
            "avg_ms": 3.0,
            "p99_ms": 7.0,
            "queue_ms": 0.1,
        }
        groups = {events.cluster_group(cluster): [point], events.model_group(model): [point]}
        recent.recent_record(payloads=groups, now=now)


def test_live_page_opens_with_15_minutes_and_continues_live(
    triton_cluster, daphne_server, page, make_user
):
    nodes = triton_cluster.nodes
    model = f"hist_{uuid.uuid4().hex[:8]}"
    name = model.replace("_", "-")
    cluster = db_cluster(name, nodes)
    make_user("olga", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name=f"t-{name}", actor=ada)
    model_create(name=model, team=f"t-{name}", actor=ada)
    config = load_example(nodes, example="risk_score", name=model, versions=[1])
    _rollups(cluster, nodes, model, range(16, 2, -1))
    _buffered(name, model, 150)
    base = f"http://{daphne_server}"
    try:
        with traffic(nodes, model, config, version="1", rps=20), running_collector(1.0):
            login(page, base, "olga")
            for path in (f"/clusters/{name}/live/", f"/models/{model}/live/"):
                page.goto(f"{base}{path}")
                page.wait_for_function(f"{HISTORY} >= 14", timeout=2000)
                first_x = page.evaluate("document.getElementById('chart-rate').data[0].x[0]")
                assert time.time() - _epoch(first_x) >= 14 * 60
                drawn = page.evaluate(POINTS)
                page.wait_for_function(f"{POINTS} > {drawn}", timeout=15000)
                assert page.locator("[data-testid=empty-chart-rate]").is_hidden()
    finally:
        unload(nodes, model)


def _epoch(plotly_x) -> float:
    from datetime import datetime

    return datetime.fromisoformat(str(plotly_x).replace("Z", "+00:00")).timestamp()


def _axis_year(page, chart: str) -> str:
    return page.evaluate(f"String(document.getElementById('{chart}').layout.xaxis.range[0])")


def test_empty_charts_say_why(triton_cluster, daphne_server, page, make_user):
    nodes = triton_cluster.nodes
    make_user("olga", role="release-managers")
    base = f"http://{daphne_server}"
    suffix = uuid.uuid4().hex[:6]
    quiet = db_cluster(f"quiet-{suffix}", nodes)
    dead = db_cluster(f"dead-{suffix}", [])
    dead.nodes.create(
        name="gone", http_url="http://127.0.0.1:9", metrics_url="http://127.0.0.1:9/m"
    )
    status._client().delete(status.status_key())  # the test Redis: as if no collector ever ran
    login(page, base, "olga")
    page.goto(f"{base}/clusters/{quiet.name}/live/")
    note = page.locator("[data-testid=empty-chart-rate]")
    assert "Waiting for the first scrape" in note.inner_text()
    assert not _axis_year(page, "chart-rate").startswith("2000")
    with running_collector(1.0):
        time.sleep(3)
        page.goto(f"{base}/clusters/{quiet.name}/live/")
        assert "No traffic in the last 15 minutes" in note.inner_text()
        page.wait_for_function(
            "Number(document.getElementById('chart-cpu').dataset.points || 0) >= 1", timeout=10000
        )
        page.goto(f"{base}/clusters/{dead.name}/live/")
        assert "Node down" in note.inner_text()
        assert "gone" in note.inner_text()
