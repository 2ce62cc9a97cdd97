"""A cluster's node key: written through the API (never answered back, audited as set or
changed), sent on every push and unload to nodes that ask for it, and nodes that answer
model control without any key marked open with a warning. Real nodes throughout."""

import json
import logging
import uuid

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.models import Deployment, DeploymentNode, TritonCluster, TritonNode
from deployments.reconcile import cluster_reconcile
from deployments.services import deployment_create
from integrations.triton.local import start_cluster
from models_registry.services import model_create, team_create
from tests.deploying import pushed
from tests.nodes import keyed_client
from tests.registry.archives import register_risk_score_as

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def world(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_DEPLOY_DRAIN_S = 0.1
    settings.SWITCHYARD_SECRET_FILE_ROOTS = [str(tmp_path / "secrets")]
    # Only the cluster's own key counts here, not the test settings' default.
    settings.SWITCHYARD_TRITON_DEFAULT_KEY_REF = ""
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    api = APIClient()
    api.force_authenticate(rita)
    return {"rita": rita, "ada": ada, "api": api, "tmp": tmp_path}


def _create(api, name: str, **fields):
    body = {"name": name, "environment": "staging", "router": {"driver": "none"}, **fields}
    return api.post("/api/v1/clusters/", body, format="json")


def _register_node(api, cluster: str, node):
    body = {
        "name": node.name,
        "http_url": node.http_url,
        "grpc_url": node.grpc_url,
        "metrics_url": node.metrics_url,
    }
    return api.post(f"/api/v1/clusters/{cluster}/nodes/", body, format="json")


def _audit_text(cluster_name: str) -> str:
    cluster = TritonCluster.objects.get(name=cluster_name)
    rows = AuditEvent.objects.filter(
        object_type="deployments.tritoncluster", object_id=str(cluster.pk)
    )
    return json.dumps([row.details for row in rows])


def test_the_key_is_write_only_stored_encrypted_and_audited_as_set_changed_cleared(world):
    api, key, other = world["api"], "first-key-0123456789", "second-key-0123456789"
    created = _create(api, "keyed", api_key=key)
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["has_api_key"] is True and body["api_key_kind"] == "stored"
    assert (
        "api_key" not in body and "api_key_ref" not in body and key not in created.content.decode()
    )
    row = TritonCluster.objects.get(name="keyed")
    assert row.api_key_ciphertext and key not in row.api_key_ciphertext
    assert (
        api.patch("/api/v1/clusters/keyed/", {"api_key": other}, format="json").status_code == 200
    )
    answer = api.get("/api/v1/clusters/keyed/")
    assert other not in answer.content.decode() and answer.json()["has_api_key"] is True
    cleared = api.patch("/api/v1/clusters/keyed/", {"api_key": ""}, format="json").json()
    assert cleared["has_api_key"] is False and cleared["api_key_kind"] == ""
    audit = _audit_text("keyed")
    assert key not in audit and other not in audit
    changes = [
        row.details.get("api_key")
        for row in AuditEvent.objects.filter(
            object_type="deployments.tritoncluster", object_id=str(row.pk)
        ).order_by("pk")
    ]
    assert changes == ["set", "changed", "cleared"]


def test_a_reference_names_only_node_key_variables_or_files_under_the_roots(world):
    api = world["api"]
    answer = _create(api, "by-env", api_key_ref="env:SWITCHYARD_NODE_KEY_STAGING")
    assert answer.status_code == 201 and answer.json()["api_key_kind"] == "env"
    for bad in ("env:DJANGO_SECRET_KEY", "file:/etc/passwd", "vault:x"):
        refused = _create(api, f"bad-{uuid.uuid4().hex[:6]}", api_key_ref=bad)
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["field"] == "api_key_ref"
    both = _create(api, "both", api_key="k" * 20, api_key_ref="env:SWITCHYARD_NODE_KEY")
    assert both.status_code == 400
    short = _create(api, "short", api_key="tiny-key")
    assert short.status_code == 400 and "tiny-key" not in short.content.decode()
    assert short.json()["errors"][0]["field"] == "api_key"


@pytest.mark.triton
def test_pushes_and_unloads_send_the_clusters_own_key_and_it_is_never_logged(
    world, triton_cluster, caplog
):
    caplog.set_level(logging.DEBUG)
    api, node, key = world["api"], triton_cluster.nodes[0], triton_cluster.node_key
    assert _create(api, "restricted", api_key=key.value).status_code == 201
    registered = _register_node(api, "restricted", node)
    assert registered.status_code == 201
    assert registered.json()["control_access"] == "restricted"
    assert registered.json()["warnings"] == []
    cluster = TritonCluster.objects.get(name="restricted")
    model = model_create(name=f"risk_key_{uuid.uuid4().hex[:6]}", team="fraud", actor=world["ada"])
    version = register_risk_score_as(model, world["ada"], 1)
    try:
        pushed(deployment_create(cluster=cluster, version=version, actor=world["rita"]))
        with keyed_client(node) as client:
            assert client.loaded_models().get(model.name) == {"1"}
    finally:
        unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
        pushed(unload)
    with keyed_client(node) as client:
        assert model.name not in client.loaded_models()
    assert key.value not in caplog.text
    assert key.value not in api.get("/api/v1/clusters/restricted/").content.decode()
    assert key.value not in _audit_text("restricted")


@pytest.mark.triton
def test_without_the_key_a_push_fails_naming_the_header_never_a_key(world, triton_cluster):
    api, node = world["api"], triton_cluster.nodes[0]
    assert _create(api, "keyless").status_code == 201
    assert _register_node(api, "keyless", node).status_code == 201
    cluster = TritonCluster.objects.get(name="keyless")
    model = model_create(
        name=f"risk_nokey_{uuid.uuid4().hex[:6]}", team="fraud", actor=world["ada"]
    )
    version = register_risk_score_as(model, world["ada"], 1)
    deployment = deployment_create(cluster=cluster, version=version, actor=world["rita"])
    from deployments.executor import deployment_run

    done = deployment_run(deployment_id=deployment.pk)
    assert done.status == Deployment.Status.FAILED
    errors = " ".join(
        [
            done.error,
            *DeploymentNode.objects.filter(deployment=done).values_list("error", flat=True),
        ]
    )
    assert triton_cluster.node_key.header in errors and "api_key" in errors
    assert triton_cluster.node_key.value not in errors
    with keyed_client(node) as client:
        assert model.name not in client.loaded_models()


@pytest.mark.triton
def test_an_open_node_is_warned_about_at_registration_and_on_reconcile(world, tmp_path):
    api = world["api"]
    assert _create(api, "open-nodes").status_code == 201
    with start_cluster(1, tmp_path / "open") as own:  # started without any key
        node = own.nodes[0]
        registered = _register_node(api, "open-nodes", node)
        assert registered.status_code == 201
        assert registered.json()["control_access"] == "open"
        assert "without a key" in registered.json()["warnings"][0]
        detail = api.get("/api/v1/clusters/open-nodes/").json()
        assert detail["warnings"] == registered.json()["warnings"]
        assert detail["nodes"][0]["warnings"] == registered.json()["warnings"]
        TritonNode.objects.filter(cluster__name="open-nodes").update(control_access="unknown")
        cluster_reconcile(cluster=TritonCluster.objects.get(name="open-nodes"))
        row = TritonNode.objects.get(cluster__name="open-nodes")
        assert row.health == "up" and row.control_access == "open"
        page = APIClient()
        page.force_login(world["rita"])
        html = page.get("/clusters/open-nodes/").content.decode()
        assert 'data-testid="cluster-warning"' in html and "without a key" in html
        html = page.get(f"/clusters/open-nodes/nodes/{node.name}/").content.decode()
        assert 'data-testid="node-warning"' in html
