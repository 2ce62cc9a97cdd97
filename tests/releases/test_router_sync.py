"""A running router follows its cluster's nodes (real nginx, real Triton nodes, PostgreSQL)."""

import http.client

import pytest

from deployments.models import TritonNode
from deployments.reconcile import cluster_reconcile
from deployments.services import cluster_create, node_create, serving_state_set
from integrations.routers import ModelRoute
from integrations.triton.local import free_ports
from models_registry.services import model_create, team_create
from releases.effects import set_weights
from releases.models import Release
from releases.routing import router_for, router_state, router_sync
from releases.services import release_create
from releases.tasks import routers_sync
from tests.nodes import keyed_client
from tests.registry.archives import register_risk_score_as

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


def _nginx_cluster(actor, name: str, prefix):
    (port,) = free_ports(1)
    router = {"driver": "nginx", "listen": f"127.0.0.1:{port}", "prefix_dir": str(prefix)}
    return cluster_create(actor=actor, name=name, environment="staging", router=router)


def _router_panel(client, cluster: str) -> str:
    page = client.get(f"/clusters/{cluster}/").content.decode()
    return page.split('data-testid="router-panel"', 1)[1].split("Recent deployments", 1)[0]


def _live(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/v2/health/live")
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_node_joins_the_running_router_once_it_serves_what_the_cluster_must(
    tmp_path, settings, make_user, triton_cluster, client
):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    cluster = _nginx_cluster(rita, "grow", tmp_path)
    port = int(cluster.router["listen"].rsplit(":", 1)[1])
    first, second = triton_cluster.nodes
    node_create(
        cluster=cluster, actor=rita, name="a", http_url=first.http_url, grpc_url=first.grpc_url
    )
    router = router_for(cluster)
    assert router_sync(cluster) is False  # not running: the sync never starts a router
    assert router.master_pid() is None
    route = ModelRoute("risk_score", {1: 100.0})
    router.apply(router_state(cluster, [route]))
    try:
        assert router_sync(cluster) is False  # in sync already
        model = model_create(name="risk_join", team="fraud", actor=ada)
        serving_state_set(
            cluster=cluster, model=model, versions=[register_risk_score_as(model, ada, 1)]
        )
        urls = {"http_url": second.http_url, "grpc_url": second.grpc_url}
        node_create(cluster=cluster, actor=rita, name="b", **urls)
        assert router_sync(cluster) is False  # it answers, but risk_join v1 is not loaded there
        TritonNode.objects.filter(cluster=cluster, name="b").update(health="up")
        assert router_sync(cluster) is False  # up, but risk_join v1 is not loaded there yet
        client.login(username="rita", password="pw-rita")
        panel = _router_panel(client, "grow")
        assert "running" in panel and "b (not yet)" in panel and "a (not yet)" not in panel
        cluster_reconcile(cluster=cluster)  # loads it on both nodes
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
        for node in (first, second):
            with keyed_client(node) as client:
                client.unload("risk_join")


def test_a_release_changing_its_split_keeps_what_the_router_serves_for_another(
    tmp_path, settings, make_user, client
):
    """Two releases on one cluster tick on two workers: one applies a new split before its
    row records it, and the other's apply, built from that stale row, used to undo it."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    cluster = _nginx_cluster(rita, "two", tmp_path)
    node_create(cluster=cluster, actor=rita, name="n1", http_url="http://127.0.0.1:9")
    releases = []
    for name in ("risk_a", "risk_b"):
        model = model_create(name=name, team="fraud", actor=ada)
        v1, v2 = (register_risk_score_as(model, ada, v) for v in (1, 2))
        serving_state_set(cluster=cluster, model=model, versions=[v1])
        releases.append(
            release_create(cluster=cluster, candidate=v2, actor=rita, require_benchmark=False)
        )
    first, second = releases
    router = router_for(cluster)
    try:
        set_weights(first, 0.0)
        Release.objects.filter(pk=first.pk).update(router_weight=0.0)
        set_weights(second, 0.0)
        set_weights(first, 20.0)  # applied; its row still says 0 (its tick has not saved)
        set_weights(second, 5.0)
        served = {route.model: route.weights for route in router.current().routes}
        assert served == {"risk_a": {1: 80.0, 2: 20.0}, "risk_b": {1: 95.0, 2: 5.0}}
        client.login(username="rita", password="pw-rita")
        panel = _router_panel(client, "two")
        assert "v1 80%" in panel and "v2 20%" in panel and "v2 5%" in panel
        answer = client.get("/api/v1/clusters/two/router/").json()
        assert answer["running"] is True
        (node,) = answer["nodes"]  # nothing listens on its port: it never joined
        assert node == {"name": "n1", "routed": False, "why": node["why"], "unusable": False}
        assert node["why"] == "joins once it is up with every serving version loaded"
        assert answer["routes"][0] == {
            "model": "risk_a",
            "split": [{"version": 1, "percent": 80.0}, {"version": 2, "percent": 20.0}],
        }
    finally:
        router.stop()
    assert "not running" in _router_panel(client, "two")
