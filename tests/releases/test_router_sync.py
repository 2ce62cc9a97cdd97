"""A running router follows its cluster's nodes (real nginx, real Triton nodes, PostgreSQL)."""

import http.client

import pytest

from deployments.models import TritonNode
from deployments.reconcile import cluster_reconcile
from deployments.services import cluster_create, node_create
from integrations.routers import ModelRoute
from integrations.triton.local import free_ports
from releases.routing import router_for, router_state, router_sync
from releases.tasks import routers_sync

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


def _live(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/v2/health/live")
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_node_joins_the_running_router_once_reconcile_has_seen_it_up(
    tmp_path, make_user, triton_cluster
):
    rita = make_user("rita", role="release-managers")
    (port,) = free_ports(1)
    listen = f"127.0.0.1:{port}"
    router_settings = {"driver": "nginx", "listen": listen, "prefix_dir": str(tmp_path)}
    cluster = cluster_create(actor=rita, name="grow", environment="staging", router=router_settings)
    first, second = triton_cluster.nodes
    node_create(cluster=cluster, actor=rita, name="a", http_url=first.http_url)
    router = router_for(cluster)
    assert router_sync(cluster) is False  # not running: the sync never starts a router
    assert router.master_pid() is None
    route = ModelRoute("risk_score", {1: 100.0})
    router.apply(router_state(cluster, [route]))
    try:
        assert router_sync(cluster) is False  # in sync already
        node_create(cluster=cluster, actor=rita, name="b", http_url=second.http_url)
        assert router_sync(cluster) is False  # health unknown: not before reconcile saw it
        cluster_reconcile(cluster=cluster)
        assert TritonNode.objects.get(cluster=cluster, name="b").health == "up"
        assert routers_sync() == 1  # the periodic task
        live = router.current()
        assert live.upstreams == [first.http_url, second.http_url]
        assert live.routes == [route]  # what the router served is kept
        assert _live(port) == 200

        TritonNode.objects.filter(cluster=cluster, name="a").delete()
        assert router_sync(cluster) is True
        assert router.current().upstreams == [second.http_url]
        assert router_sync(cluster) is False
    finally:
        router.stop()
