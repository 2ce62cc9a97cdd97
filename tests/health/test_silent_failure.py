"""A version that answers errors to every request while Triton says READY: real Triton nodes,
a real nginx router, real client traffic through it, health passes at the probe interval."""

import time
import uuid

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.executor import deployment_run
from deployments.services import deployment_create
from health.models import Alert
from health.watch import cluster_health_pass
from models_registry.services import model_create
from releases import routing
from tests.deploying import pushed
from tests.health.models import FLAGGED, register_python
from tests.releases.test_release_flow import Traffic, release_world  # noqa: F401

pytestmark = [pytest.mark.triton, pytest.mark.django_db]
INTERVAL_S = 2.0


def _passes_until(cluster, predicate, max_passes: int) -> int:
    """Run a pass every INTERVAL_S (as the beat does) until `predicate()`; how many ran."""
    for n in range(1, max_passes + 1):
        time.sleep(INTERVAL_S)
        cluster_health_pass(cluster=cluster)
        if predicate():
            return n
    still = [(a.kind, a.node_name, a.summary) for a in Alert.objects.exclude(state="resolved")]
    raise AssertionError(f"not seen after {max_passes} passes; open: {still}")


def _open(kind: str | None, model: str):
    """Open alerts about `model` (of one kind, or any)."""
    alerts = Alert.objects.filter(model_name=model).exclude(state="resolved")
    return alerts.filter(kind=kind) if kind else alerts


def test_a_version_failing_every_request_while_ready_fires_and_resolves_when_fixed(
    release_world,  # noqa: F811
    settings,
    tmp_path,
):
    settings.SWITCHYARD_PROBE_INTERVAL_S = INTERVAL_S
    settings.SWITCHYARD_HEALTH_WINDOW_S = 2 * INTERVAL_S
    settings.SWITCHYARD_HEALTH_MIN_REQUESTS = 10
    world, flag = release_world, tmp_path / "broken"
    cluster = world["cluster"]
    name = f"silent_{uuid.uuid4().hex[:6]}"
    model = model_create(name=name, team="fraud", actor=world["ada"], sla={"min_success_rate": 99})
    version = register_python(model, world["ada"], FLAGGED.format(flag=str(flag)))
    deployment = deployment_create(cluster=cluster, version=version, actor=world["rita"])
    pushed(deployment)
    routing.router_for(cluster).apply(routing.router_state(cluster, []))
    try:
        with Traffic(world["port"], name) as traffic:
            for _ in range(2):  # healthy: nothing fires
                time.sleep(INTERVAL_S)
                report = cluster_health_pass(cluster=cluster)
            assert report.probes == 2 and not Alert.objects.filter(model_name=name).exists()
            # Healthy, and no reload under the traffic: nothing failed, nothing was reset.
            assert traffic.ok > 0 and traffic.failed == 0 and traffic.retries == 0, (
                traffic.summary()
            )

            flag.touch()  # the fault: every request now gets an error response
            passes = _passes_until(cluster, lambda: _open("silent_failure", name).exists(), 2)
            alert = _open("silent_failure", name).get()
            # Clients saw errors; Triton counted every one of them as a success
            # (docs/TRITON.md §metrics): the alert fires on what the router saw.
            assert alert.details["router_errors"] > 0 and alert.details["triton_failures"] == 0
            assert alert.details["triton_requests"] > 0
            assert alert.version == version.version and alert.severity == "critical"
            # The probes saw it on both nodes while Triton said READY.
            _passes_until(cluster, lambda: _open("probe_failed_while_ready", name).count() == 2, 2)
            # Remediation (off by default): one reload per node, not again within the hour.
            api = APIClient()
            api.force_authenticate(world["rita"])
            url = f"/api/v1/clusters/{cluster.name}/health-settings/"
            assert api.get(url).json() == {"remediation_enabled": False}
            assert api.put(url, {"remediation_enabled": True}, format="json").status_code == 200
            reloads = AuditEvent.objects.filter(action="health.version_reloaded")
            for _ in range(2):
                cluster_health_pass(cluster=cluster)
                assert sorted(r.details["node"] for r in reloads) == sorted(
                    n.name for n in world["nodes"]
                )
            fired = AuditEvent.objects.get(action="alert.fired", object_id=str(alert.pk))
            assert fired.details["kind"] == "silent_failure" and fired.details["model"] == name
            assert traffic.failed > 0 and passes <= 2

            flag.unlink()  # fixed: the window fills with good requests again
            _passes_until(cluster, lambda: not _open(None, name).exists(), 6)
        alert.refresh_from_db()
        assert alert.state == "resolved" and alert.resolved_at is not None
        assert AuditEvent.objects.filter(action="alert.resolved", object_id=str(alert.pk)).exists()
    finally:
        flag.unlink(missing_ok=True)
        unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
        deployment_run(deployment_id=unload.pk)
