"""Live telemetry end to end: real Triton nodes with traffic, the collector, the Redis
channel layer, daphne and a websocket client."""

import asyncio
import json
import time
import uuid

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from accounts.services import ws_ticket_create
from integrations.triton.local import start_cluster
from telemetry.collector import Collector, ScrapeSource, Target
from tests.conftest import in_thread, session_node_key
from tests.telemetry.live import db_cluster, load_example, running_collector, traffic, unload

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]


def _points_until(ws, predicate, deadline: float) -> dict | None:
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = json.loads(ws.recv(timeout=left))
        except TimeoutError:
            return None
        if predicate(message):
            return message
    return None


def test_websocket_client_gets_a_point_with_traffic_for_the_right_version_within_3_s(
    triton_cluster, daphne_server, make_user
):
    nodes = triton_cluster.nodes
    name = f"live_{uuid.uuid4().hex[:8]}"
    db_cluster(name.replace("_", "-"), nodes)
    ticket, _ = ws_ticket_create(user=make_user("olga", role="release-managers"), token=None)
    config = load_example(nodes, example="risk_score", name=name, versions=[1, 2])
    url = f"ws://{daphne_server}/ws/clusters/{name.replace('_', '-')}/?ticket={ticket}"
    try:
        with (
            traffic(nodes, name, config, version="2", rps=30),
            connect(url, origin=f"http://{daphne_server}") as ws,
        ):
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
            with running_collector(interval_s=1.0):
                started = time.monotonic()
                point = _points_until(
                    ws,
                    lambda m: m["type"] == "point" and m["model"] == name and m["version"] == "2",
                    started + 3.0,
                )
                assert point is not None, "no point within 3 s"
                assert point["request_rate"] > 0
                assert point["success_rate"] == 100.0 and point["avg_ms"] > 0
                node = _points_until(ws, lambda m: m["type"] == "node", started + 3.0)
                assert node is not None and node["stale"] is False and node["mem_total"] > 0
    finally:
        unload(nodes, name)


def test_node_restart_gives_no_negative_or_spiking_rate(tmp_path):
    with start_cluster(1, tmp_path, metrics_interval_ms=1000, node_key=session_node_key()) as own:
        node = own.nodes[0]
        name = f"restart_{uuid.uuid4().hex[:8]}"
        config = load_example([node], example="risk_score", name=name, versions=[2])
        collector = Collector([ScrapeSource([Target("own", node.name, node.metrics_url)])])
        rates: list[tuple[str, float]] = []

        async def ticks(count: int, phase: str) -> None:
            for _ in range(count):
                payloads = await collector.tick(time.time())
                for p in payloads.get("cluster-own", []):
                    if p["type"] == "point" and p["node"] and p["model"] == name:
                        rates.append((phase, p["request_rate"]))
                await asyncio.sleep(0.5)

        # While the node restarts, requests find no server (refused, reset, or a request
        # written to a socket the dying server closed), a server not ready yet (503) or
        # without the model loaded again yet (400, 404).
        down = frozenset(
            {
                "ConnectionRefusedError",
                "RemoteDisconnected",
                "ConnectionResetError",
                "BrokenPipeError",
            }
        )
        restarting = down | {"503", "400", "404"}
        with traffic([node], name, config, version="2", rps=40, allowed=restarting):
            in_thread(asyncio.run, ticks(6, "before"))
            own.restart(node)
            load_example([node], example="risk_score", name=name, versions=[2])
            in_thread(asyncio.run, ticks(8, "after"))
        before = [r for phase, r in rates if phase == "before"]
        after = [r for phase, r in rates if phase == "after"]
        assert before and after, rates
        assert min(r for _, r in rates) >= 0
        assert max(after) <= 1.5 * max(before), rates


@pytest.mark.parametrize("path", ["/ws/clusters/prod/", "/ws/models/risk_score/"])
def test_anonymous_live_websocket_is_refused(daphne_server, path):
    with pytest.raises((InvalidStatus, ConnectionClosed)) as refused:
        with connect(f"ws://{daphne_server}{path}", origin=f"http://{daphne_server}") as ws:
            ws.recv(timeout=10)
    if isinstance(refused.value, ConnectionClosed):
        assert refused.value.rcvd is None or refused.value.rcvd.code in (1006, 4401)


def test_unknown_cluster_is_refused_for_a_signed_in_user(daphne_server, make_user):
    ticket, _ = ws_ticket_create(user=make_user("olga"), token=None)
    url = f"ws://{daphne_server}/ws/clusters/nope/?ticket={ticket}"
    with pytest.raises((InvalidStatus, ConnectionClosed)):
        with connect(url, origin=f"http://{daphne_server}") as ws:
            ws.recv(timeout=10)
