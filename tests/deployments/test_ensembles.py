"""Ensembles on real Triton nodes: answering through their steps, and a push that would
leave an ensemble without a step refused with the ensemble named (deployments/services.py
`refuse_if_graph_breaks`)."""

import io

import numpy as np
import pytest
from rest_framework.test import APIClient

from deployments.executor import deployment_run
from deployments.models import Deployment
from deployments.push import build_plan
from deployments.selectors import desired_state
from deployments.services import calls_planned, cluster_create, deployment_create
from deployments.smoke import model_version_smoke_validate
from health.services import Finding, alert_fire
from integrations.triton.model_config.graph import Step, model_calls
from models_registry.models import Model
from models_registry.services import (
    RegistryError,
    model_create,
    model_version_register,
    team_create,
)
from tests.deploying import pushed
from tests.nodes import keyed_client, register_nodes
from tests.registry.archives import example_files, register_risk_score_as, tar_gz

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


def _ensemble_config(
    step_version: int, *, name: str = "risk_pipeline", step: str = "risk_step", note: str = ""
) -> bytes:
    """An ensemble `name` of one step, `step` at `step_version` (-1: its newest): TXN in,
    the step's SCORE out as RISK; `note` as a comment (two versions alike but for it)."""
    return f"""# {note}
name: "{name}"
platform: "ensemble"
max_batch_size: 64
input [ {{ name: "TXN" data_type: TYPE_FP32 dims: [ 128 ] }} ]
output [ {{ name: "RISK" data_type: TYPE_FP32 dims: [ 1 ] }} ]
ensemble_scheduling {{
  step [
    {{
      model_name: "{step}"
      model_version: {step_version}
      input_map {{ key: "FEATURES" value: "TXN" }}
      output_map {{ key: "SCORE" value: "RISK" }}
    }}
  ]
}}
""".encode()


def graphs_cluster(triton_cluster, rita):
    """A staging cluster `graphs` of the session's nodes, without a router; serving nothing,
    it is where smoke tests run."""
    cluster = cluster_create(
        actor=rita,
        name="graphs",
        environment="staging",
        router={"driver": "none"},
        api_key=triton_cluster.node_key.value,
    )
    register_nodes(cluster, triton_cluster.nodes, actor=rita)
    return cluster


@pytest.fixture
def world(triton_cluster, settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_DEPLOY_DRAIN_S = 0.2
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    step = model_create(name="risk_step", team="fraud", actor=ada)
    steps = [register_risk_score_as(step, ada, variant) for variant in (1, 2)]
    pipeline = model_create(name="risk_pipeline", team="fraud", actor=ada)
    archive = tar_gz([("config.pbtxt", _ensemble_config(1)), ("1", "dir", None)])
    ensemble = model_version_register(model=pipeline, archive=io.BytesIO(archive), actor=ada)
    cluster = graphs_cluster(triton_cluster, rita)
    yield {"rita": rita, "ada": ada, "cluster": cluster, "steps": steps, "ensemble": ensemble}
    for model in ("risk_pipeline", "risk_gate", "risk_step"):  # the nodes serve other tests
        for node in triton_cluster.nodes:
            keyed_client(node).unload(model)


def _refusal(user, body: dict, path: str = "/api/v1/deployments/") -> dict:
    api = APIClient()
    api.force_authenticate(user)
    answer = api.post(path, body, format="json")
    assert answer.status_code == 409, answer.content
    return answer.json()


def test_an_ensemble_keeps_its_steps(world, triton_cluster, client):
    """Steps deployed by hand first (test_ensemble_steps_first.py: deployed with it)."""
    rita, cluster, ensemble = world["rita"], world["cluster"], world["ensemble"]
    pushed(deployment_create(cluster=cluster, version=world["steps"][0], actor=rita))
    pushed(deployment_create(cluster=cluster, version=ensemble, actor=rita))
    features = np.random.default_rng(7).random((1, 128), dtype=np.float32)
    for node in triton_cluster.nodes:  # the ensemble answers through its step on every node
        on_node = keyed_client(node)
        through = on_node.infer("risk_pipeline", {"TXN": features}).outputs["RISK"]
        direct = on_node.infer("risk_step", {"FEATURES": features}, version=1).outputs["SCORE"]
        assert through.shape == (1, 1) and np.allclose(through, direct)

    unload = _refusal(rita, {}, path="/api/v1/clusters/graphs/models/risk_step/unload/")
    assert "risk_pipeline v1 calls risk_step v1" in unload["errors"][0]["message"]
    assert unload["errors"][1] == {
        "field": "model",
        "message": "risk_pipeline v1 (ensemble) calls risk_step v1 on graphs.",
    }
    replace = _refusal(rita, {"cluster": "graphs", "model": "risk_step", "version": 2})
    assert "Serving only v2 of risk_step" in replace["errors"][0]["message"]
    # Refused before anything was queued: the step still serves and the ensemble answers.
    assert Deployment.objects.filter(cluster=cluster, model__name="risk_step").count() == 1
    for node in triton_cluster.nodes:
        assert keyed_client(node).infer("risk_pipeline", {"TXN": features}).outputs[
            "RISK"
        ].shape == (1, 1)

    # A release of the step would take away the version the ensemble pins at promotion
    # (one on the newest is a graph release: tests/releases/test_release_graph.py): refused,
    # even as a dry run.
    release = {
        "cluster": "graphs",
        "model": "risk_step",
        "candidate_version": 2,
        "strategy": "blue_green",
        "require_benchmark": False,
        "dry_run": True,
    }
    refused = _refusal(rita, release, path="/api/v1/releases/")
    assert (
        "risk_pipeline v1 pins risk_step v1, which a promotion unloads"
        in refused["errors"][0]["message"]
    )

    # The cluster page offers to unload the step with what calls it.
    client.force_login(rita)
    page = client.get("/clusters/graphs/").content.decode()
    row = page.split('href="/models/risk_step/"')[1].split("</tr>")[0]
    assert 'data-testid="unload-with-callers"' in row and "Unload with risk_pipeline" in row
    assert 'name="with_callers" value="1"' in row

    # The step unloaded with its callers: the ensemble's unload first, the step's after it.
    api = APIClient()
    api.force_authenticate(rita)
    path = "/api/v1/clusters/graphs/models/risk_step/unload/"
    accepted = api.post(path, {"with_callers": True}, format="json")
    assert accepted.status_code == 202, accepted.content
    (first,) = accepted.json()["waits_for"]
    caller = Deployment.objects.get(pk=first)
    assert (caller.kind, caller.model.name, caller.waits_for.count()) == (
        "unload",
        "risk_pipeline",
        0,
    )
    step_unload = Deployment.objects.get(pk=accepted.json()["id"])
    # Run before its caller's unload, it waits (its caller's finish queues it again).
    assert deployment_run(deployment_id=step_unload.pk).status == "pending"
    progress = client.get(f"/deployments/{step_unload.pk}/progress/").content.decode()
    waits = progress.split('data-testid="deployment-waits"')[1].split("</div>")[0]
    assert f">#{caller.pk}</a> (risk_pipeline, pending)" in waits
    pushed(caller)
    pushed(step_unload)
    assert desired_state(cluster=cluster) == {"risk_pipeline": [], "risk_step": []}  # unloaded
    for node in triton_cluster.nodes:
        loaded = keyed_client(node).loaded_models()
        assert "risk_pipeline" not in loaded and "risk_step" not in loaded


def test_the_pages_draw_the_pipeline_name_its_callers_and_show_a_failing_step(world, client):
    """No node needed: the pages read the stored configs."""
    client.force_login(world["rita"])
    page = client.get("/models/risk_pipeline/versions/1/").content.decode()
    graph = page.split('data-testid="ensemble-graph"')[1].split("</ol>")[0]
    assert graph.index("request") < graph.index("risk_step") < graph.index("response")
    assert 'href="/models/risk_step/"' in graph and "v1" in graph
    pinned = client.get("/models/risk_step/versions/1/").content.decode()
    called = pinned.split('data-testid="called-by"')[1].split("</ul>")[0]
    assert 'href="/models/risk_pipeline/versions/1/"' in called and "pinned" in called
    other = client.get("/models/risk_step/versions/2/").content.decode()
    assert 'data-testid="called-by"' not in other  # the ensemble pins v1, not v2
    assert 'data-testid="ensemble-graph"' not in pinned  # a step is no ensemble

    # The API gives the graph as data, both ways.
    api = APIClient()
    api.force_authenticate(world["rita"])
    shown = api.get("/api/v1/models/risk_pipeline/versions/1/").json()
    assert shown["calls"] == [{"model": "risk_step", "version": 1, "kind": "ensemble_step"}]
    assert shown["called_by"] == []
    step = api.get("/api/v1/models/risk_step/versions/1/").json()
    assert step["calls"] == [] and step["called_by"] == [
        {"model": "risk_pipeline", "version": 1, "kind": "ensemble_step"}
    ]
    assert api.get("/api/v1/models/risk_step/versions/2/").json()["called_by"] == []

    # A failing step degrades the pipeline: its page lists the step's open alerts.
    alert_fire(
        finding=Finding(
            kind="silent_failure",
            severity="critical",
            summary="risk_step v1 on graphs: 100.0% of 40 requests failed at the router",
            cluster=world["cluster"],
            model="risk_step",
            version=1,
        )
    )
    page = client.get("/models/risk_pipeline/").content.decode()
    through = page.split('data-testid="open-alerts-through"')[1].split("</table>")[0]
    assert "Open alerts of risk_step" in through and "100.0% of 40 requests" in through
    assert (
        'data-testid="open-alerts-through"' not in client.get("/models/risk_step/").content.decode()
    )


def test_an_ensembles_smoke_answers_through_its_steps_under_temporary_names(world, triton_cluster):
    """The world's cluster serves nothing: its nodes are where smoke tests run."""
    report = model_version_smoke_validate(version_id=world["ensemble"].pk)
    assert report["passed"] is True, report
    assert report["steps"] == ["risk_step v1"] and report["output_shapes"] == {"RISK": [1, 1]}
    world["ensemble"].refresh_from_db()
    assert world["ensemble"].status == "smoke_passed"
    for node in triton_cluster.nodes:  # the ensemble and its step unloaded again
        assert not [m for m in keyed_client(node).loaded_models() if "--smoke-" in m]

    pinned_away = model_version_register(
        model=world["ensemble"].model,
        archive=io.BytesIO(tar_gz([("config.pbtxt", _ensemble_config(7)), ("1", "dir", None)])),
        actor=world["ada"],
    )
    report = model_version_smoke_validate(version_id=pinned_away.pk)
    assert report["passed"] is False
    assert report["error"] == "its step risk_step v7 has no registered version"


def _bls_gate(world, *, declared: bool = True):
    """The fraud_gate example as `risk_gate`, calling `risk_step` from its code; its config
    declares the call unless `declared` is False."""
    files = example_files("fraud_gate", 1)
    config = files.pop("config.pbtxt").replace(b'"fraud_gate"', b'"risk_gate"')
    config = config.replace(b'string_value: "risk_score"', b'string_value: "risk_step"')
    if not declared:
        config = config.split(b"parameters {")[0] + config.split(b"}\n}\n", 1)[1]
    code = files.pop("model.py").replace(b'model_name="risk_score"', b'model_name="risk_step"')
    gate = Model.objects.filter(name="risk_gate").first() or model_create(
        name="risk_gate", team="fraud", actor=world["ada"]
    )
    archive = tar_gz([("config.pbtxt", config), ("1/model.py", code)])
    return model_version_register(model=gate, archive=io.BytesIO(archive), actor=world["ada"])


def test_a_bls_models_call_is_traced_by_its_smoke_and_guards_what_it_calls(
    world, triton_cluster, client
):
    rita, cluster = world["rita"], world["cluster"]
    gate = _bls_gate(world)
    assert model_calls(gate.config_json) == [Step("risk_step", None)]
    # Its smoke loads risk_step beside it under its own name (the newest registered, v2)
    # and sees the inference reach it through Triton's counters.
    report = model_version_smoke_validate(version_id=gate.pk)
    assert report["passed"] is True, report
    assert report["calls"] == {"seen": ["risk_step"], "unseen": []}
    assert report["steps"] == ["risk_step v2"] and report["output_shapes"]["DECISION"] == [1, 1]
    for node in triton_cluster.nodes:  # nothing left loaded: its call unloaded too
        loaded = keyed_client(node).loaded_models()
        assert "risk_step" not in loaded and not [m for m in loaded if "--smoke-" in m]

    client.force_login(rita)  # the version pages draw the call and what its smoke saw
    page = client.get("/models/risk_gate/versions/1/").content.decode()
    calls = page.split('data-testid="bls-calls"')[1].split("</ol>")[0]
    assert 'href="/models/risk_step/"' in calls and 'data-testid="call-seen"' in calls
    called = client.get("/models/risk_step/versions/2/").content.decode()
    assert "risk_gate</code> v1</a> (BLS)" in called.split('data-testid="called-by"')[1]

    # Deployed onto a cluster serving nothing, what it calls comes first.
    assert [f"{v.model.name} v{v.version}" for v in calls_planned(cluster, gate)] == [
        "risk_step v2"
    ]
    pushed(deployment_create(cluster=cluster, version=world["steps"][1], actor=rita))
    pushed(deployment_create(cluster=cluster, version=gate, actor=rita))
    features = np.random.default_rng(5).random((1, 128), dtype=np.float32)
    answer = keyed_client(triton_cluster.nodes[0]).infer("risk_gate", {"FEATURES": features})
    assert answer.outputs["DECISION"].reshape(-1)[0] in (b"approve", b"review", b"decline")
    refused = _refusal(rita, {}, path="/api/v1/clusters/graphs/models/risk_step/unload/")
    assert (
        refused["errors"][1]["message"] == "risk_gate v1 (BLS) calls risk_step (newest) on graphs."
    )
    # Nor can a release split what a BLS model's code calls by name (ensembles on the newest
    # are graph releases: tests/releases/test_release_graph.py).
    release = {
        "cluster": "graphs",
        "model": "risk_step",
        "candidate_version": 1,
        "strategy": "blue_green",
        "require_benchmark": False,
        "dry_run": True,
    }
    refused = _refusal(rita, release, path="/api/v1/releases/")
    message = refused["errors"][0]["message"]
    assert "risk_gate v1 is a BLS model calling risk_step (newest) from its code" in message
    pushed(deployment_create(cluster=cluster, version=None, model=gate.model, actor=rita))
    pushed(
        deployment_create(cluster=cluster, version=None, model=world["steps"][1].model, actor=rita)
    )


def test_a_bls_model_that_declares_nothing_is_refused_at_upload(world):
    """Undeclared, nothing would load its calls first, and its native warm-up's failing
    call took a Triton 2.51 node down with SIGSEGV in 2 of 3 suite runs."""
    gate = _bls_gate(world)
    with pytest.raises(RegistryError) as refused:
        _bls_gate(world, declared=False)
    error = refused.value.errors[0]
    assert (error["file"], error["line"]) == ("1/model.py", 26)
    assert "calls other models through Triton (InferenceRequest, line 26)" in error["message"]
    assert (
        'parameters { key: "switchyard.calls" value: { string_value: "risk_step" } }'
        in (error["message"])
    )
    assert gate.model.versions.count() == 1
    # Declared, it carries no native warm-up: the push's own inference warms it once READY.
    assert "model_warmup" not in build_plan([gate], upload=True).config_dict
