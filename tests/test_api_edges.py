"""The API's edges answer in its error shape whatever the settings (issue #30): unknown
paths under /api/ (with DEBUG on too, where Django would answer its HTML debug page), a
missing final slash, and an empty multipart upload."""

import pytest
from rest_framework.test import APIClient

from models_registry.services import model_create, team_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def ada(make_user):
    user = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=user)
    model_create(name="risk_score", team="fraud", actor=user)
    client = APIClient()
    client.force_authenticate(user)
    return client


def _is_api_error(answer, status: int) -> list[dict]:
    assert answer.status_code == status, answer.content[:300]
    assert answer["Content-Type"].startswith("application/json"), answer["Content-Type"]
    errors = answer.json()["errors"]
    assert errors and all(e["message"] for e in errors)
    return errors


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("method", ["get", "post", "put", "delete"])
@pytest.mark.parametrize("path", ["/api/v1/no-such-thing/", "/api/v2/models/", "/api/x"])
def test_an_unknown_api_path_is_a_json_404(ada, settings, debug, method, path):
    settings.DEBUG = debug
    answer = getattr(ada, method)(path)
    assert _is_api_error(answer, 404) == [{"message": "Not found."}]


def test_an_unknown_path_outside_the_api_keeps_the_page(ada):
    answer = ada.get("/no-such-page/")
    assert answer.status_code == 404
    assert answer["Content-Type"].startswith("text/html")


def test_a_known_path_without_its_slash_is_redirected_or_named(ada, settings):
    settings.DEBUG = True
    answer = ada.get("/api/v1/models", {"team": "fraud"})
    assert answer.status_code == 301
    assert answer["Location"] == "/api/v1/models/?team=fraud"
    errors = _is_api_error(ada.post("/api/v1/models", {}, format="json"), 404)
    assert errors[0]["message"].endswith("/api/v1/models/")


def test_an_empty_multipart_upload_is_a_json_400(ada):
    answer = ada.post("/api/v1/models/risk_score/versions/", {}, format="multipart")
    errors = _is_api_error(answer, 400)
    assert any(e.get("field") == "archive" or "archive" in e["message"] for e in errors), errors


def test_a_multipart_body_with_no_parts_is_a_json_400(ada):
    boundary = "sy-boundary"
    answer = ada.generic(
        "POST",
        "/api/v1/models/risk_score/versions/",
        data=f"--{boundary}--\r\n".encode(),
        content_type=f"multipart/form-data; boundary={boundary}",
    )
    _is_api_error(answer, 400)
    answer = ada.generic(
        "POST", "/api/v1/models/risk_score/versions/", data=b"", content_type="multipart/form-data"
    )
    _is_api_error(answer, 400)
