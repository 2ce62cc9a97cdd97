"""Smoke tests run only on a node of a cluster that serves nothing; a version that kills its
node fails its smoke with the reason and an alert, and the shared nodes keep serving."""

import io
from pathlib import Path

import pytest

from deployments.services import cluster_create, node_create, serving_state_set
from deployments.smoke import model_version_smoke_validate, smoke_node
from health.models import Alert
from integrations.triton.local import start_cluster
from models_registry.services import model_create, model_version_register, team_create
from tests.registry.archives import register_risk_score_as, tar_gz

pytestmark = [pytest.mark.triton, pytest.mark.django_db]

KILL_SERVER = Path(__file__).resolve().parents[1] / "triton_models" / "kill_server"


@pytest.fixture
def own_node(tmp_path):
    """A node of this test's own: the model under test kills it (never a shared node)."""
    cluster = start_cluster(1, tmp_path / "own")
    try:
        yield cluster.nodes[0]
    finally:
        cluster.stop()


def _add_cluster(name: str, nodes) -> object:
    cluster = cluster_create(actor=None, name=name, environment="staging")
    for node in nodes:
        node_create(
            cluster=cluster,
            actor=None,
            name=node.name,
            http_url=node.http_url,
            grpc_url=node.grpc_url,
            metrics_url=node.metrics_url,
        )
    return cluster


def _kill_server_archive() -> io.BytesIO:
    entries = [("config.pbtxt", (KILL_SERVER / "config.pbtxt").read_bytes())]
    entries += [("1/model.py", (KILL_SERVER / "1" / "model.py").read_bytes())]
    return io.BytesIO(tar_gz(entries))


def test_a_node_killing_model_fails_its_smoke_with_the_reason_and_an_alert(
    triton_cluster, own_node, settings, tmp_path, make_user
):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    # The shared nodes serve a model: their cluster is never where a smoke runs.
    busy = _add_cluster("busy", triton_cluster.nodes)
    risk = model_create(name="risk_busy", team="fraud", actor=ada)
    serving_state_set(cluster=busy, model=risk, versions=[register_risk_score_as(risk, ada, 1)])
    _add_cluster("smoke", [own_node])
    model = model_create(name="kill_server", team="fraud", actor=ada)
    version = model_version_register(model=model, archive=_kill_server_archive(), actor=ada)
    node, _ = smoke_node(version)
    assert node.cluster.name == "smoke"

    report = model_version_smoke_validate(version_id=version.pk)

    assert report["passed"] is False and report.get("node_lost") is True, report
    assert "the node stopped answering during the smoke" in report["error"]
    # This process started the node, so its exit status is known here.
    assert "load (its warm-up inference) (killed by SIGSEGV (signal 11))" in report["error"]
    version.refresh_from_db()
    assert version.status == "smoke_failed" and version.validation["smoke"] == report
    alert = Alert.objects.get(kind="smoke_node_lost")
    assert alert.severity == "critical" and alert.state == "firing"
    assert (alert.cluster_name, alert.node_name, alert.model_name) == (
        "smoke",
        own_node.name,
        "kill_server",
    )
    assert not own_node.is_running()
    assert all(shared.is_live() for shared in triton_cluster.nodes)
