"""A push asked for while the Celery broker is out of reach (issue #18): a real daphne whose
broker URL points at a port nothing listens on, a real Triton node, a real worker.

The request is answered at once with 202 (not a 500 after the ~20 s a result-storing task
spent reconnecting), the deployment is kept PENDING and marked unqueued, and the sweep
queues it once a broker answers: a real worker then runs it to the end. Nothing asked for
is lost and the web process never logs a 500 or a traceback."""

import uuid

import pytest

from controlplane.celery import app
from deployments.models import Deployment
from deployments.services import cluster_create, node_create
from deployments.sweep import deployments_unqueued_sweep
from integrations.triton.local import free_ports
from models_registry.services import model_create, team_create
from tests.cli.test_cli_flow import _start_daphne
from tests.conftest import drop_queues, start_celery_worker, stop_process, wait_for
from tests.deployments.test_push import _register
from tests.test_api_wait import _call, node  # noqa: F401 - fixture

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]


def test_a_push_asked_for_while_the_broker_is_down_runs_once_it_is_back(
    node,  # noqa: F811
    settings,
    tmp_path,
    make_user,
):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    rita, ada = make_user("rita", role="release-managers"), make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    _register(model_create(name="risk_score", team="fraud", actor=ada), ada, 1)
    cluster = cluster_create(
        actor=rita, name="broker-down", environment="staging", router={"driver": "none"}
    )
    node_create(
        cluster=cluster, actor=rita, name=node.name, http_url=node.http_url, grpc_url=node.grpc_url
    )
    (closed,) = free_ports(1)  # nothing listens there: the broker is down
    queue = f"test-{uuid.uuid4().hex[:10]}"
    env = {
        "SWITCHYARD_STORAGE_ROOT": str(settings.SWITCHYARD_STORAGE_ROOT),
        "SWITCHYARD_DEPLOY_DRAIN_S": "0.2",
        "SWITCHYARD_TEST_BROKER_URL": f"redis://127.0.0.1:{closed}/0",
        "SWITCHYARD_CELERY_QUEUE": queue,
    }
    log = tmp_path / "daphne.log"
    proc, url = _start_daphne(log, env)
    try:
        status, body = _call(
            url, "POST", "/api/v1/auth/token/", {"username": "rita", "password": "pw-rita"}
        )
        assert status == 200, body
        # Answered after kombu's few publish retries: the client's deadline is far past
        # them and only catches a request left hanging on the broker.
        status, created = _call(
            url,
            "POST",
            "/api/v1/deployments/",
            {"cluster": "broker-down", "model": "risk_score", "version": 1},
            body["token"],
            timeout_s=120,
        )
    finally:
        stop_process(proc)
    assert status == 202 and created["state"] == "pending", created
    deployment = Deployment.objects.get(pk=created["id"])
    assert deployment.status == "pending" and deployment.unqueued_since is not None
    text = log.read_text(errors="replace")
    assert "not queued, the sweep queues it later" in text, text[-2000:]
    assert "Traceback" not in text and '" 500 ' not in text, text[-3000:]

    worker = start_celery_worker(tmp_path / "worker.log", queue)
    default_queue, app.conf.task_default_queue = app.conf.task_default_queue, queue
    try:
        assert deployments_unqueued_sweep() == [deployment.pk]  # the broker answers again
        assert deployments_unqueued_sweep() == []  # queued once, not on every sweep
        wait_for(
            lambda: Deployment.objects.get(pk=deployment.pk).is_finished,
            timeout_s=90,
            what="the swept deployment finishing",
        )
    finally:
        app.conf.task_default_queue = default_queue
        worker.stop()
        drop_queues(queue)
    deployment.refresh_from_db()
    assert deployment.status == "succeeded", deployment.error
    assert deployment.unqueued_since is None
