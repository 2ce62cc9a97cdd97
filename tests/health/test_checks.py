"""Alerts from rows other apps keep: node down, drift reconcile cannot heal, a release that
rolled back. The node is never contacted (nothing listens on 127.0.0.1:9)."""

import pytest
from django.utils import timezone

from deployments.models import DriftEvent, TritonNode
from health.models import Alert
from health.watch import cluster_health_pass, health_pass_all
from releases.models import Release
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_TRITON_TIMEOUT_S = 0.5
    return release_world(make_user)


def _open(kind: str):
    return Alert.objects.filter(kind=kind).exclude(state="resolved")


def test_a_node_reconcile_marked_down_fires_and_resolves_when_it_is_up(world):
    node = world["cluster"].nodes.get()
    TritonNode.objects.filter(pk=node.pk).update(health="down", last_error="connection refused")
    cluster_health_pass(cluster=world["cluster"])
    alert = _open("node_down").get()
    assert alert.node_name == "n1" and "connection refused" in alert.summary
    # The unreachable node gives no probe verdict: no probe alert, none resolved.
    assert not _open("probe_failed_while_ready").exists()
    TritonNode.objects.filter(pk=node.pk).update(health="up")
    cluster_health_pass(cluster=world["cluster"])
    assert not _open("node_down").exists()


def test_drift_fires_after_the_configured_passes_in_a_row_and_a_repair_ends_it(world, settings):
    settings.SWITCHYARD_DRIFT_ALERT_PASSES = 3
    node, cluster = world["cluster"].nodes.get(), world["cluster"]

    def event(kind):
        DriftEvent.objects.create(
            cluster=cluster,
            node=node,
            node_name="n1",
            model_name="risk_score",
            kind=kind,
            detail="load failed: out of memory",
        )

    for _ in range(2):
        event(DriftEvent.Kind.REPAIR_FAILED)
    cluster_health_pass(cluster=cluster)
    assert not _open("drift_not_healed").exists()
    event(DriftEvent.Kind.REPAIR_FAILED)
    cluster_health_pass(cluster=cluster)
    alert = _open("drift_not_healed").get()
    assert (alert.node_name, alert.model_name) == ("n1", "risk_score")
    assert "3 passes in a row" in alert.summary
    event(DriftEvent.Kind.MISSING)  # reconcile loaded it this time
    cluster_health_pass(cluster=cluster)
    assert not _open("drift_not_healed").exists()


def test_a_release_that_rolled_back_alerts_until_a_later_one_succeeds(world):
    v1, v2 = world["versions"]

    def release(phase: str) -> Release:
        return Release.objects.create(
            cluster=world["cluster"],
            model=world["model"],
            baseline=v1,
            candidate=v2,
            steps=[{"weight": 10}],
            phase=phase,
            reason="error rate 21% over the SLA's 1%",
            finished_at=timezone.now(),
        )

    release("ROLLED_BACK")
    health_pass_all()
    alert = _open("release_rolled_back").get()
    assert alert.version == 2 and "rolled back to v1" in alert.summary
    assert "error rate 21%" in alert.summary
    release("SUCCEEDED")
    health_pass_all()
    assert not _open("release_rolled_back").exists()


def test_a_node_open_to_model_control_fires_a_warning_until_it_refuses_without_a_key(world):
    node = world["cluster"].nodes.get()
    TritonNode.objects.filter(pk=node.pk).update(health="up", control_access="open")
    cluster_health_pass(cluster=world["cluster"])
    alert = _open("node_open").get()
    assert alert.node_name == "n1" and alert.severity == "warning"
    assert "without a key" in alert.summary
    TritonNode.objects.filter(pk=node.pk).update(control_access="restricted")
    cluster_health_pass(cluster=world["cluster"])
    assert not _open("node_open").exists()
