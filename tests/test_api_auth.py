"""The token endpoint and a role-guarded endpoint, per role (API.md, Auth)."""

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def _token(username: str) -> str:
    response = APIClient().post(
        "/api/v1/auth/token/",
        {"username": username, "password": f"pw-{username}"},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()["token"]


def _client(username: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {_token(username)}")
    return client


def test_token_endpoint_gives_a_token_that_authenticates(make_user):
    make_user("ada", role="algorithm")
    token, second = _token("ada"), _token("ada")
    assert token != second  # every sign-in makes its own token (only digests are stored)
    for secret in (token, second):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        me = client.get("/api/v1/auth/me/").json()
        assert me == {"username": "ada", "roles": ["algorithm"], "is_superuser": False}


def test_token_endpoint_refuses_a_wrong_password_in_the_error_shape(make_user):
    make_user("ada", role="algorithm")
    response = APIClient().post(
        "/api/v1/auth/token/", {"username": "ada", "password": "wrong"}, format="json"
    )
    assert response.status_code == 401  # was 400 before issue #17
    assert response["WWW-Authenticate"] == 'Token realm="api"'
    assert response.json() == {
        "errors": [{"message": "Unable to sign in with the given username and password."}]
    }


def test_token_endpoint_names_missing_fields():
    response = APIClient().post("/api/v1/auth/token/", {"username": "ada"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "password", "message": "This field is required."}
    ]


def test_algorithm_team_creates_a_team_and_it_is_audited(make_user):
    make_user("ada", role="algorithm")
    response = _client("ada").post("/api/v1/teams/", {"name": "fraud"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["name"] == "fraud"
    event = AuditEvent.objects.get(action="team.created")
    assert event.actor_username == "ada"
    assert event.object_repr == "fraud"


@pytest.mark.parametrize("role", ["release-managers", "managers", None])
def test_other_roles_may_read_teams_but_not_create_them(make_user, role):
    make_user("someone", role=role)
    client = _client("someone")
    assert client.get("/api/v1/teams/").status_code == 200
    response = client.post("/api/v1/teams/", {"name": "fraud"}, format="json")
    assert response.status_code == 403
    assert response.json() == {
        "errors": [{"message": "This action needs one of the roles: algorithm."}]
    }
    assert not AuditEvent.objects.filter(action="team.created").exists()


def test_superuser_may_create_teams(make_user):
    make_user("root", superuser=True)
    assert _client("root").post("/api/v1/teams/", {"name": "x"}, format="json").status_code == 201


def test_anonymous_gets_401_in_the_error_shape():
    response = APIClient().get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json()["errors"][0]["message"].startswith("Authentication credentials")


def test_duplicate_and_invalid_team_names_are_refused_and_nothing_is_written(make_user):
    make_user("ada", role="algorithm")
    client = _client("ada")
    assert client.post("/api/v1/teams/", {"name": "fraud"}, format="json").status_code == 201
    dup = client.post("/api/v1/teams/", {"name": "fraud"}, format="json")
    assert dup.status_code == 409
    assert dup.json()["errors"] == [
        {"field": "name", "message": "A team named 'fraud' already exists."}
    ]
    bad = client.post("/api/v1/teams/", {"name": "no spaces"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "name"
    assert AuditEvent.objects.filter(action="team.created").count() == 1


def test_role_groups_exist_from_the_data_migration():
    """The data migration's function makes the three role groups (called here: a
    transactional test earlier in the session empties every table after it, the
    migration's rows too)."""
    import importlib

    from django.apps import apps
    from django.contrib.auth.models import Group

    migration = importlib.import_module("accounts.migrations.0001_role_groups")
    migration.create_groups(apps, None)
    names = set(Group.objects.values_list("name", flat=True))
    assert {"algorithm", "release-managers", "managers"} <= names
