"""Uploads that could make a node load native code or crash are refused with file and line;
a custom backend is accepted only while a cluster allows it, and pushed only there."""

import io

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.models import TritonCluster
from deployments.services import cluster_create, node_create, serving_state_set
from deployments.smoke import smoke_node
from models_registry.models import Model, ModelVersion
from releases.services import ReleaseError, release_create
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db

GOOD = example_entries("risk_score", 1)
CONFIG = GOOD[0][1].decode()
MODEL_PY = dict(GOOD)["1/model.py"]


def _upload(client, entries, model="risk_score"):
    upload = io.BytesIO(tar_gz(entries))
    upload.name = "m.tar.gz"
    return client.post(f"/api/v1/models/{model}/versions/", {"archive": upload}, format="multipart")


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _refused(response) -> list[dict]:
    assert response.status_code == 400, response.content
    assert ModelVersion.objects.count() == 0
    return response.json()["errors"]


def _evil(config: str = CONFIG) -> list[tuple]:
    text = config.replace('backend: "python"', 'backend: "evil"')
    return [("config.pbtxt", text.encode()), ("1/libtriton_evil.so", b"\x7fELF\x02\x01")]


@pytest.fixture
def rita(make_user):
    client = APIClient()
    client.force_authenticate(make_user("rita", role="release-managers"))
    return client


def test_an_unknown_backend_and_its_library_are_refused_naming_file_and_line(ada):
    errors = _refused(_upload(ada, _evil()))
    backend = next(e for e in errors if e["file"] == "config.pbtxt")
    assert "backend 'evil' is not allowed" in backend["message"]
    assert backend["line"] == _line(CONFIG, "backend:")
    library = next(e for e in errors if e["file"] == "1/libtriton_evil.so")
    assert "shared library" in library["message"]


def test_a_custom_backend_is_accepted_once_a_cluster_allows_it_and_pushed_only_there(ada, rita):
    body = {"name": "lab", "environment": "staging", "router": {"driver": "none"}}
    assert rita.post("/api/v1/clusters/", body, format="json").status_code == 201
    patch = rita.patch("/api/v1/clusters/lab/", {"custom_backends": ["evil"]}, format="json")
    assert patch.status_code == 200 and patch.json()["custom_backends"] == ["evil"]
    audit = AuditEvent.objects.get(action="cluster.backends_changed")
    assert audit.details == {"before": [], "after": ["evil"]}
    assert _upload(ada, _evil()).status_code == 201
    other = cluster_create(actor=None, name="other", environment="staging")
    node_create(cluster=other, actor=None, name="n1", http_url="http://127.0.0.1:9")
    answer = rita.post(
        "/api/v1/deployments/",
        {"cluster": "other", "model": "risk_score", "version": 1},
        format="json",
    )
    assert answer.status_code == 400
    assert "custom_backends" in answer.json()["errors"][0]["message"]
    assert "'other'" in answer.json()["errors"][0]["message"]
    version = ModelVersion.objects.get()
    with pytest.raises(ReleaseError, match="custom_backends"):
        release_create(cluster=other, candidate=version, actor=None)
    # Smoke tests of it run only where it may load: on lab (no node yet), never on "other".
    reason = (
        "no smoke test: no idle staging cluster has a node that is not down and serves "
        "nothing in another cluster"
    )
    assert smoke_node(version) == (None, reason)
    node_create(
        cluster=TritonCluster.objects.get(name="lab"),
        actor=None,
        name="l1",
        http_url="http://127.0.0.1:8",
    )
    assert smoke_node(version)[0].cluster.name == "lab"
    TritonCluster.objects.filter(name="lab").update(custom_backends=[])
    assert smoke_node(version) == (
        None,
        "no smoke test: no idle staging cluster allows backend 'evil'",
    )


def test_custom_backends_are_refused_by_a_non_manager_and_must_be_names(ada, rita):
    TritonCluster.objects.create(name="lab", environment="staging")
    refused = ada.patch("/api/v1/clusters/lab/", {"custom_backends": ["x"]}, format="json")
    assert refused.status_code == 403
    bad = rita.patch("/api/v1/clusters/lab/", {"custom_backends": ["../x"]}, format="json")
    assert bad.status_code == 400


def test_op_library_filename_is_refused_with_its_line(ada):
    config = CONFIG + 'model_operations {\n  op_library_filename: "/usr/lib/evil.so"\n}\n'
    (error,) = _refused(_upload(ada, [("config.pbtxt", config.encode()), *GOOD[1:]]))
    assert error["file"] == "config.pbtxt" and error["line"] == _line(config, "op_library")


def test_execution_env_path_outside_the_model_folder_is_refused_with_its_line(ada):
    config = CONFIG + (
        'parameters: {\n  key: "EXECUTION_ENV_PATH"\n'
        '  value: { string_value: "$$TRITON_MODEL_DIRECTORY/../../envs/x.tar.gz" }\n}\n'
    )
    (error,) = _refused(_upload(ada, [("config.pbtxt", config.encode()), *GOOD[1:]]))
    assert "EXECUTION_ENV_PATH" in error["message"]
    assert error["line"] == _line(config, "EXECUTION_ENV_PATH")


def test_an_elf_file_under_any_name_is_refused(ada):
    (error,) = _refused(_upload(ada, [*GOOD, ("1/helper.bin", b"\x7fELF\x02\x01\x01")]))
    assert error["file"] == "1/helper.bin" and "shared library" in error["message"]


def test_a_python_model_without_execute_is_refused_naming_the_class(ada):
    source = MODEL_PY.replace(b"def execute(", b"def run(")
    assert source != MODEL_PY
    (error,) = _refused(_upload(ada, [CONFIG_ENTRY, ("1/model.py", source), *REST]))
    assert error["file"] == "1/model.py" and "TritonPythonModel" in error["message"]
    assert "execute" in error["message"]


def test_a_python_syntax_error_is_refused_with_file_and_line(ada):
    source = MODEL_PY + b"\ndef broken(:\n"
    (error,) = _refused(_upload(ada, [CONFIG_ENTRY, ("1/model.py", source), *REST]))
    assert error["file"] == "1/model.py"
    assert error["line"] == source.decode().splitlines().index("def broken(:") + 1


def test_without_an_idle_staging_cluster_the_smoke_is_skipped_saying_why(
    ada, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        assert _upload(ada, GOOD).status_code == 201
    smoke = ModelVersion.objects.get().validation["smoke"]
    assert smoke == {"skipped": True, "reason": "no smoke test: there is no staging cluster"}
    cluster = cluster_create(actor=None, name="busy", environment="staging")
    node_create(cluster=cluster, actor=None, name="n1", http_url="http://127.0.0.1:9")
    serving_state_set(
        cluster=cluster, model=Model.objects.get(), versions=[ModelVersion.objects.get()]
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert _upload(ada, [*GOOD, ("1/notes.txt", b"v2")]).status_code == 201
    smoke = ModelVersion.objects.get(version=2).validation["smoke"]
    assert smoke["skipped"] is True and "each serves models" in smoke["reason"]
    # The same node listed in an idle cluster too is still not idle.
    dup = cluster_create(actor=None, name="dup", environment="staging")
    node_create(cluster=dup, actor=None, name="n1", http_url="http://127.0.0.1:9")
    node, why = smoke_node(ModelVersion.objects.get(version=2))
    assert node is None and why.endswith("serves nothing in another cluster")


CONFIG_ENTRY = GOOD[0]
REST = [entry for entry in GOOD[1:] if entry[0] != "1/model.py"]
