"""Registry pages rendered by Django (content checks; the browser flow is in tests/browser)."""

import io

import pytest

from models_registry.services import Provenance, model_create, model_version_register, team_create
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def storage(settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"


def _register(model, user, variant: int, label: str):
    archive = io.BytesIO(tar_gz(example_entries("risk_score", variant)))
    return model_version_register(
        model=model, archive=archive, actor=user, provenance=Provenance(label=label)
    )


def test_empty_model_list_teaches_how_to_register(client, make_user):
    make_user("ada", role="algorithm")
    client.login(username="ada", password="pw-ada")
    html = client.get("/models/").content.decode()
    assert "Register your first model" in html
    assert "models/risk_score/versions/" in html  # the command-line recipe


def test_model_and_version_pages_show_versions_diff_and_warnings(client, make_user):
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada, tags=["tabular"])
    _register(model, ada, 1, "first")
    _register(model, ada, 2, "second")
    make_user("max", role="managers")
    client.login(username="max", password="pw-max")

    listing = client.get("/models/?tag=tabular").content.decode()
    assert "risk_score" in listing
    detail = client.get("/models/risk_score/").content.decode()
    assert "first" in detail and "second" in detail
    assert "Upload a new version" not in detail  # managers read only
    page = client.get("/models/risk_score/versions/2/").content.decode()
    assert "config.pbtxt is identical to v1" in page
    assert 'class="pb-key"' in page

    # A smoke report as deployments.smoke records it.
    smoke = {"passed": True, "node": "staging/n1", "load_ms": 180.5, "native_warmup": True}
    smoke |= {"latency_ms": 1.2, "output_shapes": {"SCORE": [1, 1]}}
    version = model.versions.get(version=2)
    version.validation = {**version.validation, "smoke": smoke}
    version.save(update_fields=["validation"])
    page = client.get("/models/risk_score/versions/2/").content.decode()
    assert "loaded and warmed up by Triton in 180.5 ms, then one inference" in page


def test_sla_form_saves_for_the_algorithm_team_and_is_refused_to_others(client, make_user):
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model_create(name="risk_score", team="fraud", actor=ada)
    client.login(username="ada", password="pw-ada")
    response = client.post(
        "/models/risk_score/", {"p99_latency_ms": "45", "min_success_rate": "99.9"}
    )
    assert response.status_code == 302
    from models_registry.models import Model

    assert Model.objects.get(name="risk_score").sla["p99_latency_ms"] == 45
    make_user("rita", role="release-managers")
    client.login(username="rita", password="pw-rita")
    assert client.post("/models/risk_score/", {"p99_latency_ms": "1"}).status_code == 403
    assert client.get("/models/risk_score/upload/").status_code == 403
