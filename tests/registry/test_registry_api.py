"""The model registry through its REST API, on real PostgreSQL and a real storage folder."""

import hashlib
import io
import tarfile
import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from audit.models import AuditEvent
from models_registry.models import Model, ModelVersion
from tests.registry.archives import example_entries, example_files, tar_gz, zip_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def storage(settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    return settings.SWITCHYARD_STORAGE_ROOT


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def ada(make_user):
    return _client(make_user("ada", role="algorithm"))


def _create_model(client, name="risk_score", team="fraud", **extra):
    if not client.get("/api/v1/teams/").json():
        assert client.post("/api/v1/teams/", {"name": team}, format="json").status_code == 201
    body = {"name": name, "team": team, **extra}
    response = client.post("/api/v1/models/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _upload(client, model: str, archive: bytes, filename="m.tar.gz", **fields):
    upload = io.BytesIO(archive)
    upload.name = filename
    return client.post(
        f"/api/v1/models/{model}/versions/", {"archive": upload, **fields}, format="multipart"
    )


def _expected_digest(files: dict[str, bytes]) -> str:
    lines = sorted(
        f"{'config' if p == 'config.pbtxt' else 'file'}\t{p}\t{len(b)}\t"
        f"{hashlib.sha256(b).hexdigest()}\n"
        for p, b in files.items()
    )
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _nothing_stored(storage) -> bool:
    blobs = list((storage / "blobs").rglob("*")) if (storage / "blobs").exists() else []
    staging = list((storage / "staging").iterdir()) if (storage / "staging").exists() else []
    return not [b for b in blobs if b.is_file()] and not staging


def test_example_models_register_with_digests_of_their_files(ada):
    _create_model(ada, sla={"p99_latency_ms": 50, "min_success_rate": 99.5})
    for number, variant in enumerate((1, 2, 3, 4), start=1):
        response = _upload(
            ada,
            "risk_score",
            tar_gz(example_entries("risk_score", variant)),
            label=f"v2024.05.0{variant}",
            source_commit="abc123",
        )
        assert response.status_code == 201, response.content
        body = response.json()
        assert body["version"] == number and body["label"] == f"v2024.05.0{variant}"
        assert body["digest"] == _expected_digest(example_files("risk_score", variant))
        assert body["status"] == "registered" and body["validation"]["valid"] is True
    detail = ada.get("/api/v1/models/risk_score/versions/2/").json()
    by_path = {f["path"]: f for f in detail["files"]}
    for path, data in example_files("risk_score", 2).items():
        assert by_path[path]["sha256"] == hashlib.sha256(data).hexdigest()
        assert by_path[path]["size"] == len(data)
    assert detail["config"]["parsed"]["name"] == "risk_score"
    assert detail["provenance"]["source_commit"] == "abc123"
    listed = ada.get("/api/v1/models/risk_score/versions/").json()
    assert [v["version"] for v in listed] == [4, 3, 2, 1]

    _create_model(ada, name="ticket_router")
    text = _upload(
        ada, "ticket_router", zip_bytes(example_entries("ticket_router", 1)), filename="t.zip"
    )
    assert text.status_code == 201, text.content
    assert text.json()["digest"] == _expected_digest(example_files("ticket_router", 1))
    assert AuditEvent.objects.filter(action="model_version.registered").count() == 5


def test_files_at_the_top_and_a_wrapping_folder_are_accepted(ada):
    _create_model(ada)
    files = example_files("risk_score", 1)
    flat = tar_gz(list(files.items()))
    wrapped = tar_gz([(f"risk_score/{e[0]}", e[1]) for e in example_entries("risk_score", 1)])
    first = _upload(ada, "risk_score", flat, label="l0")
    assert first.json()["digest"] == _expected_digest(files)
    # Same content, same digest: the second upload is that version, not a new one.
    again = _upload(ada, "risk_score", wrapped, label="l1")
    assert again.status_code == 409
    assert again.json()["errors"][0]["field"] == "archive"
    assert "already version 1 ('l0')" in again.json()["errors"][0]["message"]
    assert ModelVersion.objects.filter(model__name="risk_score").count() == 1


def test_archive_download_is_byte_identical(ada):
    _create_model(ada)
    assert _upload(ada, "risk_score", tar_gz(example_entries("risk_score", 2))).status_code == 201
    response = ada.get("/api/v1/models/risk_score/versions/1/archive/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    data = b"".join(response.streaming_content)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    expected = example_files("risk_score", 2)
    assert got == {
        ("risk_score/config.pbtxt" if p == "config.pbtxt" else f"risk_score/1/{p}"): b
        for p, b in expected.items()
    }
    # The download registers again as the same content.
    upload = io.BytesIO(data)
    upload.name = "m.tar.gz"
    again = ada.post(
        "/api/v1/models/risk_score/versions/?return_existing=true",
        {"archive": upload, "label": "again"},
        format="multipart",
    )
    assert again.status_code == 200
    assert again.json()["version"] == 1
    assert again.json()["digest"] == _expected_digest(expected)


GOOD = example_entries("risk_score", 1)
CONFIG = GOOD[0]
MODEL_PY = ("1/model.py", b"print('x')\n")

REFUSED = {
    "absolute path": ([CONFIG, ("/etc/1/model.py", b"x")], "absolute path"),
    "dot-dot": ([CONFIG, ("1/../../evil.py", b"x")], "climbs out"),
    "symlink": ([CONFIG, MODEL_PY, ("1/link", "symlink", "/etc/passwd")], "symbolic link"),
    "hard link": ([CONFIG, MODEL_PY, ("1/hard", "hardlink", "1/model.py")], "hard link"),
    "device file": ([CONFIG, MODEL_PY, ("1/dev", "chardev", None)], "device"),
    "fifo": ([CONFIG, MODEL_PY, ("1/pipe", "fifo", None)], "device, FIFO"),
    "duplicate path": ([CONFIG, MODEL_PY, MODEL_PY], "appears twice"),
    "two version folders": ([CONFIG, MODEL_PY, ("2/model.py", b"x")], "2 version folders"),
    "non-numeric version folder": ([CONFIG, ("v1/model.py", b"x")], "not a version folder"),
    "leading zero": ([CONFIG, ("01/model.py", b"x")], "leading zero"),
    "empty archive": ([], "the archive is empty"),
    "no config": ([MODEL_PY], "no config.pbtxt"),
    "config only": ([CONFIG], "no version files"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_archives_name_the_problem_and_leave_nothing(ada, storage, case):
    _create_model(ada)
    entries, fragment = REFUSED[case]
    response = _upload(ada, "risk_score", tar_gz(entries))
    assert response.status_code == 400, response.content
    messages = " ".join(e["message"] for e in response.json()["errors"])
    assert fragment in messages
    assert ModelVersion.objects.count() == 0
    assert Model.objects.get(name="risk_score").next_version == 1
    assert _nothing_stored(storage)


def test_too_many_files_is_refused(ada, storage, settings):
    settings.SWITCHYARD_MAX_ARCHIVE_FILES = 3
    _create_model(ada)
    entries = [CONFIG, *[(f"1/f{i}.bin", b"x") for i in range(5)]]
    response = _upload(ada, "risk_score", tar_gz(entries))
    assert response.status_code == 400
    assert "more than 3 files" in response.json()["errors"][0]["message"]
    assert _nothing_stored(storage)


def test_upload_over_the_size_limit_is_refused(ada, storage, settings):
    settings.SWITCHYARD_MAX_UPLOAD_BYTES = 1000
    _create_model(ada)
    response = _upload(ada, "risk_score", tar_gz(GOOD))
    assert response.status_code == 413
    assert response.json()["errors"][0]["field"] == "archive"
    assert _nothing_stored(storage)


def test_not_an_archive_is_refused(ada, storage):
    _create_model(ada)
    response = _upload(ada, "risk_score", b"this is not an archive at all")
    assert response.status_code == 400
    assert "not a readable tar file" in response.json()["errors"][0]["message"]
    assert _nothing_stored(storage)


def test_config_syntax_error_reports_file_line_and_column(ada, storage):
    _create_model(ada)
    config = CONFIG[1].decode().replace("data_type: TYPE_FP32", "data_type: FP32", 1)
    line = next(i for i, text in enumerate(config.splitlines(), 1) if "data_type: FP32" in text)
    response = _upload(ada, "risk_score", tar_gz([("config.pbtxt", config.encode()), *GOOD[1:]]))
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["file"] == "config.pbtxt" and error["line"] == line
    assert "FP32" in error["message"]
    assert _nothing_stored(storage)
    assert ModelVersion.objects.count() == 0


def test_python_version_without_model_py_is_refused(ada, storage):
    _create_model(ada)
    response = _upload(ada, "risk_score", tar_gz([CONFIG, ("1/weights.npz", b"x")]))
    assert response.status_code == 400
    assert "model.py" in response.json()["errors"][0]["message"]
    assert _nothing_stored(storage)


def test_dims_pitfall_is_a_stored_warning_not_an_error(ada):
    _create_model(ada)
    config = CONFIG[1].decode().replace("dims: [ 128 ]", "dims: [ 1, 128 ]")
    response = _upload(ada, "risk_score", tar_gz([("config.pbtxt", config.encode()), *GOOD[1:]]))
    assert response.status_code == 201, response.content
    warnings = response.json()["validation"]["warnings"]
    assert any("[1, 128]" in w["message"] or "1,128" in w["message"] for w in warnings), warnings
    stored = ModelVersion.objects.get()
    assert stored.warnings == warnings


def test_name_mismatch_is_refused(ada):
    _create_model(ada, name="other_model")
    response = _upload(ada, "other_model", tar_gz(GOOD))
    assert response.status_code == 400
    assert "risk_score" in response.json()["errors"][0]["message"]


def test_labels_are_unique_per_model_and_a_refusal_does_not_burn_a_version(ada):
    _create_model(ada)
    assert _upload(ada, "risk_score", tar_gz(GOOD), label="gold").status_code == 201
    other = tar_gz(example_entries("risk_score", 2))
    dup = _upload(ada, "risk_score", other, label="gold")
    assert dup.status_code == 409
    assert dup.json()["errors"][0] == {
        "field": "label",
        "message": "Label 'gold' is already used by another version of risk_score.",
    }
    assert _upload(ada, "risk_score", other).json()["version"] == 2


def test_non_algorithm_users_get_403_on_every_registry_write(make_user, ada):
    _create_model(ada)
    for role in ("release-managers", "managers", None):
        other = _client(make_user(f"user-{role}", role=role))
        assert other.get("/api/v1/models/").status_code == 200
        assert _upload(other, "risk_score", tar_gz(GOOD)).status_code == 403
        assert (
            other.post("/api/v1/models/", {"name": "x", "team": "fraud"}, format="json").status_code
            == 403
        )
        assert (
            other.patch(
                "/api/v1/models/risk_score/", {"description": "x"}, format="json"
            ).status_code
            == 403
        )
    assert ModelVersion.objects.count() == 0


def test_sla_update_and_aliases_with_history(ada):
    _create_model(ada)
    for variant in (1, 2):
        archive = tar_gz(example_entries("risk_score", variant))
        assert _upload(ada, "risk_score", archive).status_code == 201
    patched = ada.patch(
        "/api/v1/models/risk_score/", {"sla": {"p99_latency_ms": 40}}, format="json"
    )
    assert patched.status_code == 200 and patched.json()["sla"]["p99_latency_ms"] == 40
    bad = ada.patch("/api/v1/models/risk_score/", {"sla": {"min_success_rate": 120}}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "sla.min_success_rate"
    for version in (1, 2):
        assert (
            ada.put(
                "/api/v1/models/risk_score/aliases/production/", {"version": version}, format="json"
            ).status_code
            == 200
        )
    assert ada.get("/api/v1/models/risk_score/").json()["aliases"] == {"production": 2}
    ada.put("/api/v1/models/risk_score/aliases/b/", {"version": 1}, format="json")
    both = {"b": 1, "production": 2}  # each alias with its version's number, by name
    assert list(ada.get("/api/v1/models/risk_score/").json()["aliases"].items()) == [*both.items()]
    assert ada.get("/api/v1/models/?search=risk").json()[0]["aliases"] == both
    console = Client()
    console.force_login(User.objects.get(username="ada"))
    for page in ("/models/", "/models/risk_score/"):
        text = console.get(page).content.decode()
        assert text.index("b → v1") < text.index("production → v2"), page
    moves = AuditEvent.objects.filter(action="alias.moved").order_by("id")
    assert [(m.details["from"], m.details["to"]) for m in moves][:2] == [(None, 1), (1, 2)]
    missing = ada.put(
        "/api/v1/models/risk_score/aliases/production/", {"version": 9}, format="json"
    )
    assert missing.status_code == 404


def test_model_list_filters_by_search_team_and_tag(ada):
    _create_model(ada, name="risk_score", tags=["fraud", "tabular"], description="card risk")
    ada.post("/api/v1/teams/", {"name": "support"}, format="json")
    _create_model(ada, name="ticket_router", team="support", tags=["nlp"])
    names = lambda q: [m["name"] for m in ada.get(f"/api/v1/models/?{q}").json()]  # noqa: E731
    assert names("") == ["risk_score", "ticket_router"]
    assert names("search=card") == ["risk_score"]
    assert names("team=support") == ["ticket_router"]
    assert names("tag=tabular") == ["risk_score"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_uploads_get_distinct_consecutive_versions(make_user):
    from models_registry.services import model_create, model_version_register, team_create

    user = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=user)
    model = model_create(name="risk_score", team="fraud", actor=user)
    archive = tar_gz(GOOD)
    results, errors = [], []
    barrier = threading.Barrier(4)

    def upload():
        try:
            barrier.wait()
            version = model_version_register(model=model, archive=io.BytesIO(archive), actor=user)
            results.append(version.version)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=upload) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(results) == [1, 2, 3, 4]
    assert Model.objects.get(pk=model.pk).next_version == 5


def test_a_model_named_like_a_name_the_control_plane_loads_is_refused(ada):
    _create_model(ada)  # the team
    for name in ("risk_score--c2", "risk_score--smoke-2-abcdef", "risk_score--bench-4-v2-abcdef"):
        answer = ada.post("/api/v1/models/", {"name": name, "team": "fraud"}, format="json")
        assert answer.status_code == 400, answer.content
        error = answer.json()["errors"][0]
        assert error["field"] == "name" and "would be filed as another model's" in error["message"]
    _create_model(ada, name="risk_score--cx")  # not one of those shapes
