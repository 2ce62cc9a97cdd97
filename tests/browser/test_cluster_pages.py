"""Cluster pages in Chromium: a release manager deploys through the form and watches
per-node progress until every node is ready (the deployment runs in a real worker)."""

import io

import pytest

from deployments.services import cluster_create, node_create
from models_registry.services import model_create, model_version_register, team_create
from tests.registry.archives import example_entries, tar_gz

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.django_db(transaction=True)]


def test_release_manager_deploys_from_the_cluster_page_and_sees_every_node_ready(
    live_server, page, make_user, settings, tmp_path, triton_cluster, celery_worker
):
    from controlplane.celery import app

    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    archive = io.BytesIO(tar_gz(example_entries("risk_score", 2)))
    model_version_register(model=model, archive=archive, actor=ada)
    cluster = cluster_create(
        actor=rita,
        name="shared",
        environment="production",
        router={"driver": "none", "url": "http://127.0.0.1:9999"},
    )
    for node in triton_cluster.nodes:
        node_create(
            cluster=cluster,
            actor=rita,
            name=node.name,
            http_url=node.http_url,
            grpc_url=node.grpc_url,
        )

    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-rita")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.click("text=Clusters")
    page.click("text=shared")
    assert page.inner_text("[data-testid=router-url]") == "http://127.0.0.1:9999"
    assert page.locator("[data-testid=node-card]").count() == 2

    default_queue, app.conf.task_default_queue = app.conf.task_default_queue, celery_worker.queue
    try:
        page.click("[data-testid=deploy-form] button")
        page.wait_for_selector("#deployment-progress[data-status=succeeded]", timeout=60000)
    finally:
        app.conf.task_default_queue = default_queue
    rows = page.inner_text("[data-testid=deployment-nodes]")
    assert rows.count("Ready") == 2 and "ms" in rows

    page.click("text=shared")
    matrix = page.inner_text("[data-testid=loaded-matrix]")
    assert "risk_score" in matrix and matrix.count("loaded") == 2
    page.goto(f"{live_server.url}/models/risk_score/")
    assert "Live on shared" in page.inner_text("[data-testid=live-where]")

    page.goto(f"{live_server.url}/clusters/shared/")
    page.once("dialog", lambda dialog: dialog.accept())
    app.conf.task_default_queue = celery_worker.queue
    try:
        page.click("text=Unload")
        page.wait_for_selector("#deployment-progress[data-status=succeeded]", timeout=60000)
    finally:
        app.conf.task_default_queue = default_queue
