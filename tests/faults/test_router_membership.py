"""Router membership follows health, through a real nginx and real Triton nodes: a node row
the router cannot use is left out (and shown so) without stopping the router; a node killed
leaves the upstream after the grace; restarted empty it stays out until reconcile has loaded
it, then rejoins. Clients keep getting answers from the nodes that serve."""

from datetime import timedelta

import pytest
from django.utils import timezone

from deployments.models import TritonNode
from deployments.reconcile import cluster_reconcile
from deployments.services import deployment_create, node_create
from integrations.triton.local import start_cluster
from models_registry.services import model_create
from releases import routing
from releases.selectors import router_view
from tests.conftest import session_node_key, wait_for
from tests.deploying import pushed
from tests.registry.archives import register_risk_score_as
from tests.releases.test_release_flow import (
    Traffic,
    release_world,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db]

GRACE_S = 6.0  # how long a routed node that stops answering stays in the router


@pytest.fixture(scope="module")
def triton_cluster(tmp_path_factory):
    """Two nodes of this module's own (release_world's nodes): one is killed and restarted."""
    cluster = start_cluster(2, tmp_path_factory.mktemp("membership"), node_key=session_node_key())
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def routed(release_world, triton_cluster, settings):  # noqa: F811
    """release_world's nginx cluster with a model deployed on both nodes; a 6 s grace."""
    settings.SWITCHYARD_ROUTER_DOWN_GRACE_S = GRACE_S
    world = release_world
    model = model_create(name="members_model", team="fraud", actor=world["ada"])
    version = register_risk_score_as(model, world["ada"], 1)
    deployment = deployment_create(cluster=world["cluster"], version=version, actor=world["rita"])
    pushed(deployment)
    return world | {"fleet": triton_cluster}


def _upstreams(cluster) -> list[str]:
    return routing.router_for(cluster).current().upstreams


def test_an_unusable_node_row_is_left_out_and_shown_without_stopping_the_router(routed):
    cluster, (one, two) = routed["cluster"], routed["fleet"].nodes
    node_create(cluster=cluster, actor=routed["rita"], name="bad", http_url="http://127.0.0.1:7")
    # A row written before today's checks: an address nginx cannot send to.
    TritonNode.objects.filter(cluster=cluster, name="bad").update(http_url="https://127.0.0.1:7")
    router = routing.router_for(cluster)
    router.apply(routing.router_state(cluster, []))  # starts nginx
    assert _upstreams(cluster) == [one.http_url, two.http_url]
    with Traffic(routed["port"], "members_model") as traffic:
        traffic.more(100)
    # No reload under the traffic: not a request failed, nor a connection reset.
    assert traffic.failed == 0 and traffic.retries == 0, traffic.summary()
    view = {n["name"]: n for n in router_view(cluster=cluster)["nodes"]}
    assert view["bad"]["unusable"] and not view["bad"]["routed"]
    assert "http://host:port" in view["bad"]["why"]
    assert view[one.name]["routed"] and view[two.name]["routed"]
    assert routing.router_sync(cluster) is False  # the same rule: nothing to change


def test_a_killed_node_leaves_after_the_grace_and_rejoins_once_reloaded(routed):
    cluster, nodes = routed["cluster"], routed["fleet"]
    one, two = nodes.nodes
    routing.router_for(cluster).apply(routing.router_state(cluster, []))
    cluster_reconcile(cluster=cluster)  # both seen up now
    assert _upstreams(cluster) == [one.http_url, two.http_url]
    row = TritonNode.objects.get(cluster=cluster, http_url=two.http_url)
    with Traffic(routed["port"], "members_model") as traffic:
        nodes.kill(two)
        assert routing.router_sync(cluster) is False  # within the grace: nginx retries
        wait_for(
            lambda: timezone.now() - row.last_seen_at > timedelta(seconds=GRACE_S),
            timeout_s=60,
            what="the grace since reconcile last saw the node up",
        )
        assert routing.router_sync(cluster) is True
        assert _upstreams(cluster) == [one.http_url]
        dropped_at_failures = traffic.failed
        nodes.restart(two)  # same ports, comes back empty (explicit model control)
        assert routing.router_sync(cluster) is False  # answers, but serves nothing yet
        assert _upstreams(cluster) == [one.http_url]
        traffic.more(50)  # answered while the restarted node is out
        failed_while_out = traffic.failed - dropped_at_failures
        cluster_reconcile(cluster=cluster)  # rehydrates the restarted node
        assert routing.router_sync(cluster) is True
        assert _upstreams(cluster) == [one.http_url, two.http_url]
        traffic.more(50)  # answered with both nodes back
    assert failed_while_out == 0, traffic.errors[-3:]  # an empty node never got traffic
    assert traffic.ok > 0
    # Two router reloads under the traffic (the node left, then rejoined).
    assert traffic.retries <= traffic.retries_allowed(2), traffic.summary()
    assert traffic.failed <= 5, traffic.errors[:5]  # at most requests in flight at the kill
