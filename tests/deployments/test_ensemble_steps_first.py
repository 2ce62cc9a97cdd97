"""An ensemble deployed onto a cluster that serves none of its steps, through the API and
the fleet lane's real worker: each step gets a deployment of its own that runs first, the
ensemble's waits for them and runs once they succeeded, and it answers on every node; when
a step's deployment fails, the ensemble's fails unrun and nothing of it is loaded
(deployments/services.py `calls_planned`, deployments/executor.py)."""

import io

import numpy as np
import pytest
from rest_framework.test import APIClient

from controlplane.celery import app
from deployments.models import Deployment, DeploymentNode
from deployments.selectors import desired_state
from deployments.services import (
    DeploymentError,
    calls_planned,
    deployment_create,
)
from models_registry.models import ModelVersion
from models_registry.services import model_create, model_version_register, team_create
from tests.conftest import wait_for
from tests.deployments.test_ensembles import _ensemble_config, graphs_cluster
from tests.nodes import keyed_client
from tests.registry.archives import example_entries, register_risk_score_as, tar_gz

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

_FAILS_TO_LOAD = b"""import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        raise pb_utils.TritonModelException("this step never loads")

    def execute(self, requests):
        return []
"""


@pytest.fixture
def graph(triton_cluster, lanes, settings, make_user):
    """Steps and an ensemble registered where the lanes' workers read artifacts, a staging
    cluster of the session's nodes, and the app's tasks sent to the lanes while it runs."""
    settings.SWITCHYARD_STORAGE_ROOT = lanes.storage
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    step = model_create(name="risk_step", team="fraud", actor=ada)
    good = register_risk_score_as(step, ada, 1)
    # v2 of the step: the same files but a model.py whose initialize raises.
    entries = example_entries("risk_score", 1)
    config = entries[0][1].replace(b'name: "risk_score"', b'name: "risk_step"')
    files = [(n, _FAILS_TO_LOAD if n.endswith("model.py") else b) for n, b in entries[1:]]
    broken = model_version_register(
        model=step, archive=io.BytesIO(tar_gz([("config.pbtxt", config), *files])), actor=ada
    )
    pipeline = model_create(name="risk_pipeline", team="fraud", actor=ada)
    ensembles = [
        model_version_register(
            model=pipeline,
            archive=io.BytesIO(
                tar_gz([("config.pbtxt", _ensemble_config(pin)), ("1", "dir", None)])
            ),
            actor=ada,
        )
        for pin in (1, 2)
    ]
    cluster = graphs_cluster(triton_cluster, rita)
    before, app.conf.task_default_queue = app.conf.task_default_queue, lanes.base
    try:
        yield {
            "rita": rita,
            "ada": ada,
            "cluster": cluster,
            "good": good,
            "broken": broken,
            "ensembles": ensembles,
        }
    finally:
        app.conf.task_default_queue = before
        wait_for(lanes.idle, timeout_s=120, what="the lanes' workers to go idle")
        for model in ("risk_pipeline", "risk_step"):  # the session's nodes serve other tests
            for node in triton_cluster.nodes:
                keyed_client(node).unload(model)


def _deploy(user, version: int) -> dict:
    api = APIClient()
    api.force_authenticate(user)
    body = {"cluster": "graphs", "model": "risk_pipeline", "version": version}
    answer = api.post("/api/v1/deployments/", body, format="json")
    assert answer.status_code == 202, answer.content
    return answer.json()


def _finished(deployment_id: int) -> Deployment:
    return wait_for(
        lambda: (d := Deployment.objects.get(pk=deployment_id)).is_finished and d,
        timeout_s=120,
        what=f"deployment {deployment_id} to finish",
    )


def test_an_ensemble_on_an_empty_cluster_brings_its_steps_first_and_answers(
    graph, triton_cluster, client
):
    accepted = _deploy(graph["rita"], 1)
    (step_id,) = accepted["waits_for"]
    step = Deployment.objects.get(pk=step_id)
    assert (step.model.name, step.target_versions) == ("risk_step", [1])

    ensemble = _finished(accepted["id"])
    step.refresh_from_db()
    assert (step.status, ensemble.status) == ("succeeded", "succeeded"), ensemble.error
    assert step.finished_at <= ensemble.started_at  # the step served before the ensemble ran
    assert desired_state(cluster=graph["cluster"]) == {"risk_step": [1], "risk_pipeline": [1]}
    features = np.random.default_rng(3).random((1, 128), dtype=np.float32)
    for node in triton_cluster.nodes:
        on_node = keyed_client(node)
        through = on_node.infer("risk_pipeline", {"TXN": features}).outputs["RISK"]
        direct = on_node.infer("risk_step", {"FEATURES": features}).outputs["SCORE"]
        assert np.allclose(through, direct)

    api = APIClient()
    api.force_authenticate(graph["rita"])
    shown = api.get(f"/api/v1/deployments/{ensemble.pk}/").json()
    assert shown["waits_for"] == [step.pk] and shown["state"] == "succeeded"
    assert api.get(f"/api/v1/deployments/{step.pk}/").json()["waits_for"] == []
    client.force_login(graph["rita"])  # the deployment pages show the order both ways
    order = client.get(f"/deployments/{ensemble.pk}/").content.decode()
    order = order.split('data-testid="deployment-order"')[1].split("</ul>")[0]
    assert (
        f'Runs after <a href="/deployments/{step.pk}/">#{step.pk}</a>: deploy risk_step v1' in order
    )
    then = client.get(f"/deployments/{step.pk}/").content.decode()
    assert f'Then <a href="/deployments/{ensemble.pk}/">#{ensemble.pk}</a>' in then

    # The steps serve now: the next version of the ensemble pinning another step version
    # is refused with the path, never a silent replacement of what risk_step serves.
    refused = api.post(
        "/api/v1/deployments/",
        {"cluster": "graphs", "model": "risk_pipeline", "version": 2},
        format="json",
    )
    assert refused.status_code == 409, refused.content
    message = refused.json()["errors"][0]["message"]
    assert "risk_pipeline v2 → risk_step v2: risk_step serves v1 there" in message


def test_a_step_that_fails_to_load_fails_its_ensemble_unrun(graph, triton_cluster):
    accepted = _deploy(graph["rita"], 2)  # pins the step's v2, whose initialize raises
    ensemble = _finished(accepted["id"])
    step = Deployment.objects.get(pk=accepted["waits_for"][0])
    assert (step.status, ensemble.status) == ("failed", "failed")
    assert ensemble.started_at is None  # never run
    assert ensemble.error.startswith(f"Not run: deployment {step.pk} (deploy risk_step v2 ")
    assert "this step never loads" in ensemble.error
    nodes = DeploymentNode.objects.filter(deployment=ensemble)
    assert {n.status for n in nodes} == {"skipped"}
    assert desired_state(cluster=graph["cluster"]) == {}
    for node in triton_cluster.nodes:
        loaded = keyed_client(node).loaded_models()
        assert "risk_pipeline" not in loaded and "risk_step" not in loaded
    # The model is free again: the working graph deploys.
    again = _finished(_deploy(graph["rita"], 1)["id"])
    assert again.status == "succeeded", again.error


def test_planning_refuses_what_it_cannot_deploy_and_writes_nothing(graph):
    """Each refusal names the path and comes before any row is written."""
    rita, cluster = graph["rita"], graph["cluster"]
    unknown = model_version_register(
        model=graph["ensembles"][0].model,
        archive=io.BytesIO(tar_gz([("config.pbtxt", _ensemble_config(7)), ("1", "dir", None)])),
        actor=graph["ada"],
    )
    with pytest.raises(DeploymentError) as refused:
        deployment_create(cluster=cluster, version=unknown, actor=rita)
    assert refused.value.status == 409
    assert refused.value.message.endswith(
        "risk_pipeline v3 → risk_step v7: no such version is registered."
    )
    graph["good"].status = ModelVersion.Status.SMOKE_FAILED
    graph["good"].save(update_fields=["status"])
    with pytest.raises(DeploymentError) as refused:
        deployment_create(cluster=cluster, version=graph["ensembles"][0], actor=rita)
    assert "risk_pipeline v1 → risk_step v1: v1 failed its smoke test" in refused.value.message
    assert not Deployment.objects.filter(cluster=cluster).exists()
    assert calls_planned(cluster, graph["good"]) == []  # no ensemble: no steps
