"""Refused requests surface where the router's other recent figures do: the router API and the
cluster page's router panel (real nginx, a real Triton node of the session, PostgreSQL)."""

import http.client
import time

import pytest

from deployments.services import cluster_create, node_create
from integrations.triton.local import free_ports
from releases.routing import router_for, router_state
from releases.selectors import router_refused_recent

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


def _status(port: int, method: str, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, b"{}" if method == "POST" else None)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _refused_shown(client, expected: int) -> dict:
    """The router API's answer once it counts `expected` refusals (nginx logs a request when
    it ends: the last line may lag its answer a moment)."""
    deadline = time.monotonic() + 10
    while True:
        answer = client.get("/api/v1/clusters/gate/router/").json()
        if answer["refused_requests"] >= expected or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def test_the_router_view_counts_the_requests_it_refused_over_the_window(
    tmp_path, settings, make_user, triton_cluster, client
):
    rita = make_user("rita", role="release-managers")
    (port,) = free_ports(1)
    router = {"driver": "nginx", "listen": f"127.0.0.1:{port}", "prefix_dir": str(tmp_path)}
    cluster = cluster_create(actor=rita, name="gate", environment="staging", router=router)
    node = triton_cluster.nodes[0]
    node_create(cluster=cluster, actor=rita, name="a", http_url=node.http_url)
    assert router_refused_recent(cluster=cluster)["refused_requests"] is None  # no log yet
    driver = router_for(cluster)
    driver.apply(router_state(cluster, []))
    try:
        assert _status(port, "GET", "/v2/health/live") == 200
        assert _status(port, "POST", "/v2/repository/index") == 403
        assert _status(port, "GET", "/v2/logging") == 403
        assert _status(port, "POST", "/v2/health/live") == 403
        client.force_login(rita)
        answer = _refused_shown(client, 3)
        assert answer["refused_requests"] == 3
        assert answer["refused_window_s"] == settings.SWITCHYARD_UNROUTED_WINDOW_S
        panel = client.get("/clusters/gate/").content.decode().split('data-testid="router-panel"')
        assert "Refused requests, not inference" in panel[1]
        later = router_refused_recent(cluster=cluster, now=time.time() + 3600)
        assert later["refused_requests"] == 0  # outside the window
    finally:
        driver.stop()
