"""API tokens: stored as digests, expiring, listed without secrets, revoked at once."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def _sign_in(username: str, **extra) -> dict:
    body = {"username": username, "password": f"pw-{username}", **extra}
    response = APIClient().post("/api/v1/auth/token/", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_the_token_endpoint_answers_the_secret_its_name_and_expiry(make_user, settings):
    settings.SWITCHYARD_API_TOKEN_TTL_DAYS = 7
    make_user("ada", role="algorithm")
    body = _sign_in("ada", name="ci")
    assert set(body) == {"token", "name", "expires_at"} and body["name"] == "ci"
    token = ApiToken.objects.get(user__username="ada")
    assert abs(token.expires_at - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)
    event = AuditEvent.objects.get(action="auth.token_created")
    assert event.actor_username == "ada" and body["token"] not in str(event.details)


def test_the_database_never_holds_the_secret(make_user):
    make_user("ada")
    secret = _sign_in("ada")["token"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM accounts_apitoken")
        rows = cursor.fetchall()
        cursor.execute("SELECT details::text FROM audit_auditevent")
        audit = cursor.fetchall()
    assert len(rows) == 1
    stored = " ".join(str(value) for row in rows + audit for value in row)
    assert secret not in stored
    assert secret[10:] not in stored  # beyond the public prefix, not even a part of it
    assert ApiToken.objects.get().digest != secret and len(ApiToken.objects.get().digest) == 64


def test_tokens_are_listed_without_secrets_and_only_the_callers(make_user):
    make_user("ada")
    make_user("bob")
    first, second = _sign_in("ada", name="one")["token"], _sign_in("ada", name="two")["token"]
    _sign_in("bob")
    response = _client(first).get("/api/v1/auth/tokens/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert [t["name"] for t in body["results"]] == ["two", "one"]
    assert first not in response.content.decode() and second not in response.content.decode()
    assert body["results"][1]["prefix"] == first[:10]
    assert set(body["results"][0]) == {
        "id",
        "name",
        "prefix",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    }
    assert body["results"][1]["last_used_at"] is not None  # the list call used it


def test_a_revoked_token_is_refused_at_once(make_user):
    make_user("ada")
    secret, other = _sign_in("ada")["token"], _sign_in("ada")["token"]
    client = _client(secret)
    assert client.get("/api/v1/auth/me/").status_code == 200
    token_id = ApiToken.objects.get(prefix=secret[:10]).pk
    assert _client(other).delete(f"/api/v1/auth/tokens/{token_id}/").status_code == 204
    response = client.get("/api/v1/auth/me/")
    assert response.status_code == 401
    assert response.json() == {"errors": [{"message": "Invalid, expired or revoked token."}]}
    assert _client(other).get("/api/v1/auth/me/").status_code == 200
    event = AuditEvent.objects.get(action="auth.token_revoked")
    assert event.actor_username == "ada" and event.details["token_id"] == token_id


def test_an_expired_token_is_refused(make_user):
    make_user("ada")
    secret = _sign_in("ada")["token"]
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert _client(secret).get("/api/v1/auth/me/").status_code == 401


def test_a_token_of_an_inactive_user_is_refused(make_user):
    user = make_user("ada")
    secret = _sign_in("ada")["token"]
    user.is_active = False
    user.save()
    assert _client(secret).get("/api/v1/auth/me/").status_code == 401


def test_nobody_revokes_another_users_token(make_user):
    make_user("ada")
    make_user("eve")
    _sign_in("ada")
    target = ApiToken.objects.get(user__username="ada")
    response = _client(_sign_in("eve")["token"]).delete(f"/api/v1/auth/tokens/{target.pk}/")
    assert response.status_code == 404
    target.refresh_from_db()
    assert target.revoked_at is None


def test_the_console_page_creates_shows_once_lists_and_revokes(client, make_user):
    user = make_user("ada")
    client.force_login(user)
    page = client.get("/")
    assert b'href="/account/tokens/"' in page.content  # linked from the user menu
    created = client.post("/account/tokens/", {"name": "laptop"})
    assert created.status_code == 200 and created["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=user, name="laptop")
    secret = created.context["new_secret"]
    assert secret.startswith(token.prefix) and secret.encode() in created.content
    assert _client(secret).get("/api/v1/auth/me/").status_code == 200

    listed = client.get("/account/tokens/")
    assert b"laptop" in listed.content and secret.encode() not in listed.content

    revoked = client.post(f"/account/tokens/{token.pk}/revoke/", follow=True)
    assert revoked.status_code == 200 and b"revoked" in revoked.content
    assert _client(secret).get("/api/v1/auth/me/").status_code == 401
    assert client.post("/account/tokens/", {"name": ""}).status_code == 400


def test_the_console_page_revokes_only_own_tokens(client, make_user):
    make_user("ada")
    _sign_in("ada")
    client.force_login(make_user("eve"))
    token = ApiToken.objects.get(user__username="ada")
    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    assert client.get("/account/tokens/").content.count(b'data-testid="token-row"') == 0


def test_the_plaintext_token_table_is_gone():
    assert "authtoken_token" not in connection.introspection.table_names()


def test_a_superuser_revokes_any_token_in_the_admin(client, make_user):
    make_user("ada")
    secret = _sign_in("ada")["token"]
    token = ApiToken.objects.get()
    client.force_login(make_user("root", superuser=True))
    listing = client.get("/admin/accounts/apitoken/")
    assert listing.status_code == 200 and token.prefix.encode() in listing.content
    assert secret.encode() not in listing.content and token.digest.encode() not in listing.content
    response = client.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    assert response.status_code == 302
    assert _client(secret).get("/api/v1/auth/me/").status_code == 401
    assert AuditEvent.objects.get(action="auth.token_revoked").actor_username == "root"


def test_tokens_ended_long_ago_are_pruned_daily(make_user, settings):
    from accounts.tasks import tokens_prune

    settings.SWITCHYARD_API_TOKEN_KEEP_DAYS = 90
    make_user("ada")
    for _ in range(4):
        _sign_in("ada")
    long_ago = timezone.now() - timedelta(days=91)
    recently = timezone.now() - timedelta(days=89)
    expired_long_ago, revoked_long_ago, revoked_recently, active = ApiToken.objects.all()
    ApiToken.objects.filter(pk=expired_long_ago.pk).update(expires_at=long_ago)
    ApiToken.objects.filter(pk=revoked_long_ago.pk).update(revoked_at=long_ago)
    ApiToken.objects.filter(pk=revoked_recently.pk).update(revoked_at=recently)
    assert tokens_prune() == 2
    assert set(ApiToken.objects.values_list("pk", flat=True)) == {revoked_recently.pk, active.pk}
    assert tokens_prune() == 0
    assert "accounts.tokens_prune" in {
        entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }
