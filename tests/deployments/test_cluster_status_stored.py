"""The cluster page calls no node (deployments/node_status.py): it shows what beat's reading
stored in the shared cache. A node here is a real HTTP listener that counts what it is
asked, so "no call at view time" is counted, not assumed; and a real Triton node's answer
reaches the page only through the reading."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.cache import cache

from deployments.node_status import cluster_status_stored
from deployments.services import cluster_create, node_create
from deployments.tasks import cluster_status_refresh, cluster_status_refresh_all

pytestmark = pytest.mark.django_db


class _Counting(BaseHTTPRequestHandler):
    asked: list[str] = []

    def _answer(self):
        type(self).asked.append(self.path)
        self.send_response(503)  # not live: the reading says so
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def counting_node():
    _Counting.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Counting.asked
    server.shutdown()
    server.server_close()
    thread.join(5)


def _forget(cluster):
    key = f"deployments:cluster-status:{cluster.pk}"
    cache.delete_many([key, f"{key}:queued"])


def test_viewing_the_cluster_page_asks_no_node(client, make_user, counting_node):
    url, asked = counting_node
    rita = make_user("rita", role="release-managers")
    cluster = cluster_create(actor=rita, name="counted", environment="staging")
    node_create(cluster=cluster, actor=rita, name="n1", http_url=url)
    try:
        client.force_login(rita)
        before = len(asked)
        first = client.get("/clusters/counted/").content.decode()
        assert "have not been read yet" in first and 'data-testid="node-card"' in first
        assert len(asked) == before  # nothing asked of the node by the view
        assert cluster_status_refresh_all() >= 1  # beat's pass reads every node
        read = len(asked)
        assert read > before
        for _ in range(5):
            page = client.get("/clusters/counted/").content.decode()
        assert len(asked) == read  # five views, no node call
        assert "What the nodes answered" in page and "down" in page
    finally:
        _forget(cluster)


def test_a_real_nodes_answer_reaches_the_page_through_the_reading(
    client, make_user, triton_cluster
):
    node = triton_cluster.nodes[0]
    rita = make_user("rita", role="release-managers")
    cluster = cluster_create(actor=rita, name="read", environment="staging")
    node_create(cluster=cluster, actor=rita, name="a", http_url=node.http_url)
    try:
        assert cluster_status_stored(cluster=cluster)["checked_at"] is None
        assert cluster_status_stored(cluster=cluster)["nodes"][0]["health"] == "unknown"
        assert cluster_status_refresh(cluster.pk) is True  # the task a stale page queues
        status = cluster_status_stored(cluster=cluster)
        assert status["checked_at"] is not None and not status["is_stale"]
        (shown,) = status["nodes"]
        assert shown["reachable"] and shown["health"] == "up" and shown["server_version"]
        client.force_login(rita)
        page = client.get("/clusters/read/").content.decode()
        assert f"Triton {shown['server_version']}" in page
    finally:
        _forget(cluster)
