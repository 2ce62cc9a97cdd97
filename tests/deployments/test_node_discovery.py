"""Node discovery (deployments/discovery.py) against a real Triton node: a DNS name that
resolves to the node's address makes it a node of its cluster, audited as the system; once
the name stops resolving to it, the node is taken out; nodes registered otherwise stay."""

import pytest
from django.test import override_settings

from audit.models import AuditEvent
from controlplane.queues import FLEET, lane_of
from deployments import selectors
from deployments.discovery import Discovery, addresses_of, discovery_settings, node_name
from deployments.services import cluster_create, node_create
from deployments.tasks import discover_nodes

pytestmark = pytest.mark.django_db


def _setting(cluster: str, dns: str, node) -> dict:
    return {
        cluster: {
            "dns": dns,
            "http_port": node.http_port,
            "grpc_port": node.grpc_port,
            "metrics_port": node.metrics_port,
        }
    }


def test_a_name_that_resolves_to_a_node_adds_it_and_one_that_stops_drains_it(triton_cluster):
    node = triton_cluster.nodes[0]
    cluster = cluster_create(actor=None, name="discovered", environment="staging")
    manual = node_create(cluster=cluster, actor=None, name="manual", http_url="http://127.0.0.1:9")
    with override_settings(SWITCHYARD_NODE_DISCOVERY=_setting("discovered", "localhost", node)):
        assert discover_nodes() == {"discovered": {"added": ["dns-127-0-0-1"], "drained": []}}
        assert discover_nodes() == {"discovered": {"added": [], "drained": []}}  # idempotent
    found = cluster.nodes.get(name="dns-127-0-0-1")
    assert found.http_url == node.http_url and found.grpc_url == node.grpc_url
    assert found.metrics_url == f"http://127.0.0.1:{node.metrics_port}/metrics"
    status = selectors.cluster_status(cluster=cluster)
    live = {n["name"]: n for n in status["nodes"]}
    assert live["dns-127-0-0-1"]["health"] == "up"  # a real tritonserver answered

    gone = _setting("discovered", "switchyard-discovery-test.invalid", node)
    with override_settings(SWITCHYARD_NODE_DISCOVERY=gone):
        assert discover_nodes() == {"discovered": {"added": [], "drained": ["dns-127-0-0-1"]}}
    assert list(cluster.nodes.values_list("name", flat=True)) == [manual.name]
    events = AuditEvent.objects.filter(action__in=["node.created", "node.removed"])
    system = events.filter(object_repr="discovered/dns-127-0-0-1").order_by("pk")
    assert [(e.action, e.actor_id, e.actor_username) for e in system] == [
        ("node.created", None, ""),
        ("node.removed", None, ""),
    ]


def test_a_name_that_does_not_exist_lists_no_address_and_bad_settings_are_ignored(caplog):
    assert addresses_of("localhost") == ["127.0.0.1"]
    assert addresses_of("switchyard-discovery-test.invalid") == []
    assert node_name("10.1.2.3") == "dns-10-1-2-3"
    bad = {
        "a": {"dns": ""},
        "b": {"dns": "x", "http_port": "8000"},
        "c": {"dns": "x", "extra": 1},
        "d": "triton-nodes",
        "ok": {"dns": "triton-nodes"},
    }
    with override_settings(SWITCHYARD_NODE_DISCOVERY=bad):
        assert discovery_settings() == {"ok": Discovery(dns="triton-nodes")}
    assert caplog.text.count("SWITCHYARD_NODE_DISCOVERY[") == 4


def test_discovery_runs_on_the_fleet_lane_from_the_one_beat_schedule(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["deployments-discover-nodes"]
    assert entry["task"] == "deployments.discover_nodes" and entry["schedule"] == 10.0
    assert lane_of("deployments.discover_nodes") == FLEET
