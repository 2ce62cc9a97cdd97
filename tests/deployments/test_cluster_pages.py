"""Cluster pages rendered by Django: empty state, roles, a down node, removing a node."""

import pytest

from deployments.services import cluster_create, node_create
from deployments.tasks import cluster_status_refresh_all

pytestmark = pytest.mark.django_db


def test_empty_cluster_list_teaches_how_to_register_one(client, make_user):
    make_user("max", role="managers")
    client.login(username="max", password="pw-max")
    assert "Register a Triton cluster" in client.get("/clusters/").content.decode()


def test_unreachable_node_shows_down_and_only_release_managers_see_deploy(client, make_user):
    rita = make_user("rita", role="release-managers")
    cluster = cluster_create(actor=rita, name="edge", environment="production")
    node_create(
        cluster=cluster,
        actor=rita,
        name="n1",
        http_url="http://127.0.0.1:9",
        grpc_url="127.0.0.1:9",
    )
    cluster_status_refresh_all()  # beat's reading of every node: the page reads it
    make_user("max", role="managers")
    client.login(username="max", password="pw-max")
    page = client.get("/clusters/edge/").content.decode()
    assert "down" in page and "deploy-form" not in page
    assert client.post("/clusters/edge/deploy/", {"version_id": "1"}).status_code == 403
    assert client.post("/clusters/edge/nodes/n1/remove/").status_code == 403  # max: read only

    client.login(username="rita", password="pw-rita")
    page = client.get("/clusters/edge/").content.decode()
    assert "deploy-form" in page and "/clusters/edge/nodes/n1/remove/" in page
    answer = client.post("/clusters/edge/nodes/n1/remove/", follow=True).content.decode()
    assert "n1 removed from edge" in answer and "No nodes yet" in answer
    assert not cluster.nodes.exists()
