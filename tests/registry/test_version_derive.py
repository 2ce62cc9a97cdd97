"""A version derived from another's files with a changed config (POST .../derive/), on real
PostgreSQL and a real storage folder; the derived version served by a real Triton node."""

import numpy as np
import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.models import Deployment
from deployments.services import cluster_create, deployment_create
from models_registry.models import Model, ModelVersion
from tests.conftest import session_node_key
from tests.deploying import pushed
from tests.nodes import keyed_client, register_nodes
from tests.registry.archives import example_entries, register_risk_score_as, tar_gz

pytestmark = pytest.mark.django_db

BATCHING = {
    "dynamic_batching": {"max_queue_delay_microseconds": 2000, "preferred_batch_size": [4, 8]},
    "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
}


def _derive(client, body, model="risk_score", version=1):
    return client.post(f"/api/v1/models/{model}/versions/{version}/derive/", body, format="json")


def _upload_v1(client) -> dict:
    import io

    upload = io.BytesIO(tar_gz(example_entries("risk_score", 1)))
    upload.name = "v1.tar.gz"
    answer = client.post(
        "/api/v1/models/risk_score/versions/", {"archive": upload}, format="multipart"
    )
    assert answer.status_code == 201, answer.content
    return answer.json()


def _blobs(artifacts) -> set[str]:
    return {p.name for p in (artifacts / "blobs").rglob("*") if p.is_file()}


def test_a_patch_makes_the_next_version_with_the_same_files_and_only_a_new_config(ada, artifacts):
    _upload_v1(ada)
    source = ModelVersion.objects.get(version=1)
    before = _blobs(artifacts)

    answer = _derive(ada, {"config_patch": BATCHING, "label": "batching-2k", "notes": "tuning"})
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["version"] == 2 and body["label"] == "batching-2k"
    assert body["derived_from"] == 1
    derived = ModelVersion.objects.get(version=2)
    assert derived.derived_from == source and derived.notes == "tuning"
    # The files are the source's own blobs; only the config is new.
    files = [(e["path"], e["sha256"]) for e in source.manifest if e["role"] == "file"]
    assert [(e["path"], e["sha256"]) for e in derived.manifest if e["role"] == "file"] == files
    config = next(e for e in derived.manifest if e["role"] == "config")
    assert _blobs(artifacts) - before == {config["sha256"]}
    assert derived.digest != source.digest
    # The stored config is the patched one, as Triton's schema reads it.
    assert derived.config_json["dynamic_batching"] == {
        "max_queue_delay_microseconds": "2000",
        "preferred_batch_size": [4, 8],
    }
    assert derived.config_json["instance_group"] == [{"count": 2, "kind": "KIND_CPU"}]
    assert derived.config_json["input"] == source.config_json["input"]
    assert "preferred_batch_size: 4" in derived.config_text
    detail = ada.get("/api/v1/models/risk_score/versions/2/").json()
    assert detail["derived_from"] == 1 and detail["config"]["text"] == derived.config_text
    listed = ada.get("/api/v1/models/risk_score/versions/").json()
    assert [(v["version"], v["derived_from"]) for v in listed] == [(2, 1), (1, None)]
    event = AuditEvent.objects.filter(action="model_version.registered").latest("id")
    assert event.details["derived_from"] == 1

    # A whole new config works too; deriving from a derived version chains.
    text = derived.config_text.replace("count: 2", "count: 1")
    again = _derive(ada, {"config_text": text}, version=2)
    assert again.status_code == 201, again.content
    assert again.json()["version"] == 3 and again.json()["derived_from"] == 2
    # Back to the first config byte for byte: that is version 1, named.
    back = _derive(ada, {"config_text": source.config_text}, version=3)
    assert back.status_code == 409, back.content
    assert "already version 1" in back.json()["errors"][0]["message"]
    assert ModelVersion.objects.count() == 3


def test_a_config_that_changes_nothing_is_the_source_itself(ada, artifacts):
    _upload_v1(ada)
    source = ModelVersion.objects.get(version=1)
    same = _derive(ada, {"config_text": source.config_text})
    assert same.status_code == 409, same.content
    assert "version 1's" in same.json()["errors"][0]["message"]
    # Layout and comments alone change nothing Triton reads.
    relaid = _derive(ada, {"config_text": "# tuned\n" + source.config_text.replace("  ", "    ")})
    assert relaid.status_code == 409, relaid.content
    patched = _derive(ada, {"config_patch": {"max_batch_size": 64}})  # its value already
    assert patched.status_code == 409, patched.content
    assert ModelVersion.objects.count() == 1
    # Nothing burned: the next version is still 2.
    assert Model.objects.get(name="risk_score").next_version == 2


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"config_patch": {"max_batch_sise": 8}}, "config_patch", "not a field"),
        ({"config_patch": {"name": "other"}}, "config_patch", "can't be patched"),
        ({"config_patch": {"instance_group": [{"kind": "KIND_XPU"}]}}, "config_patch", "XPU"),
        ({"config_patch": {}}, "config_patch", ""),
        ({}, "config_text", "either"),
        ({"config_text": "x", "config_patch": {"max_batch_size": 8}}, "config_text", "either"),
        ({"config_text": 'name: "risk_score"\nbackend: "python"\nmax_batch_size: ['}, None, ""),
        # Triton's own rules: preferred sizes above max_batch_size.
        (
            {"config_patch": {"dynamic_batching": {"preferred_batch_size": [128]}}},
            None,
            "preferred_batch_size",
        ),
        # Native code through the config: a backend no cluster allows.
        ({"config_patch": {"backend": "mybackend"}}, None, "mybackend"),
        ({"config_patch": {"max_batch_size": 8}, "surprise": 1}, None, "surprise"),
    ],
)
def test_refused_derivations_name_the_problem_and_leave_nothing(ada, artifacts, body, field, says):
    _upload_v1(ada)
    before = _blobs(artifacts)
    answer = _derive(ada, body)
    assert answer.status_code == 400, answer.content
    errors = answer.json()["errors"]
    if field:
        assert errors[0].get("field") == field, errors
    assert says in str(errors), errors
    assert ModelVersion.objects.count() == 1
    assert Model.objects.get(name="risk_score").next_version == 2
    assert _blobs(artifacts) == before
    assert not list((artifacts / "staging").iterdir())


def test_only_the_models_team_may_derive_and_unknown_sources_are_404(ada, make_user):
    _upload_v1(ada)
    outsider = APIClient()
    outsider.force_authenticate(make_user("olga", role="algorithm"))
    refused = _derive(outsider, {"config_patch": BATCHING})
    assert refused.status_code == 403, refused.content
    viewer = APIClient()
    viewer.force_authenticate(make_user("mia", role="managers"))
    assert _derive(viewer, {"config_patch": BATCHING}).status_code == 403
    assert _derive(ada, {"config_patch": BATCHING}, version=9).status_code == 404
    assert _derive(ada, {"config_patch": BATCHING}, model="nope").status_code == 404
    assert ModelVersion.objects.count() == 1


def test_a_source_whose_files_are_lost_is_refused(ada, artifacts):
    _upload_v1(ada)
    source = ModelVersion.objects.get(version=1)
    entry = next(e for e in source.manifest if e["role"] == "file")
    lost = next(p for p in (artifacts / "blobs").rglob(entry["sha256"]))
    lost.unlink()
    answer = _derive(ada, {"config_patch": BATCHING})
    assert answer.status_code == 409, answer.content
    assert entry["path"] in answer.json()["errors"][0]["message"]
    assert ModelVersion.objects.count() == 1


@pytest.mark.triton
def test_a_derived_version_is_served_by_triton_with_its_own_config(
    triton_cluster, make_user, settings, tmp_path
):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    from models_registry.services import model_create, team_create

    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_derived", team="fraud", actor=ada)
    register_risk_score_as(model, ada, 1)
    api = APIClient()
    api.force_authenticate(ada)
    answer = _derive(api, {"config_patch": BATCHING}, model="risk_derived")
    assert answer.status_code == 201, answer.content
    derived = ModelVersion.objects.get(model=model, version=2)

    node = triton_cluster.nodes[0]
    cluster = cluster_create(
        actor=rita,
        name="derive",
        environment="staging",
        router={"driver": "none"},
        api_key=session_node_key().value,
    )
    register_nodes(cluster, [node], actor=rita)
    try:
        pushed(deployment_create(cluster=cluster, version=derived, actor=rita))
        with keyed_client(node) as client:
            served = client.model_config("risk_derived")
            assert served["dynamic_batching"]["preferred_batch_size"] == [4, 8]
            assert served["dynamic_batching"]["max_queue_delay_microseconds"] in (2000, "2000")
            assert [g["count"] for g in served["instance_group"]] == [2]
            features = np.random.default_rng(3).normal(size=(1, 128)).astype(np.float32)
            assert client.infer("risk_derived", {"FEATURES": features}).model_version == "2"
    finally:
        unload = deployment_create(cluster=cluster, version=None, model=model, actor=rita)
        done = pushed(unload)
        assert done.status == Deployment.Status.SUCCEEDED
        with keyed_client(node) as client:
            assert "risk_derived" not in client.loaded_models()
