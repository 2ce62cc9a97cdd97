"""The cluster live page in Chromium: websocket points extend the Plotly traces."""

import uuid

import pytest

from tests.telemetry.live import db_cluster, load_example, running_collector, traffic, unload

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.django_db(transaction=True)]

POINTS = "Number(document.getElementById('chart-rate').dataset.points || 0)"


def test_live_chart_point_count_grows_from_websocket_points(
    triton_cluster, daphne_server, page, make_user
):
    nodes = triton_cluster.nodes
    model = f"page_{uuid.uuid4().hex[:8]}"
    cluster = model.replace("_", "-")
    db_cluster(cluster, nodes)
    make_user("olga", role="release-managers")
    config = load_example(nodes, example="risk_score", name=model, versions=[1])
    base = f"http://{daphne_server}"
    try:
        with traffic(nodes, model, config, version="1", rps=20), running_collector(1.0):
            page.goto(f"{base}/login/")
            page.fill("#id_username", "olga")
            page.fill("#id_password", "pw-olga")
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
            page.goto(f"{base}/clusters/{cluster}/live/")
            page.wait_for_selector("[data-testid=ws-badge]:has-text('live')", timeout=15000)
            page.wait_for_function(f"{POINTS} >= 1", timeout=15000)
            first = page.evaluate(POINTS)
            page.wait_for_function(f"{POINTS} > {first}", timeout=15000)
            assert page.evaluate("document.getElementById('chart-rate').data.length") >= 1
            badge = page.locator(f"[data-node-badge='{nodes[0].name}']")
            assert badge.inner_text() == "up"
    finally:
        unload(nodes, model)
