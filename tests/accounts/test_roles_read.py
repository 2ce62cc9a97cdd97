"""A request's user and its roles: the session's user brings its group names in the query
that loads it (every console page checks its roles: menu, badges, buttons), a token's user
reads them once at its first role check, and both answer what the groups say."""

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.backends import PoolFriendlyModelBackend
from accounts.roles import Role, user_has_role, user_roles
from accounts.services import api_token_create

pytestmark = pytest.mark.django_db


def _group_queries(get, url: str) -> tuple[int, int]:
    """(status, queries that read the user's groups apart from the user)."""
    with CaptureQueriesContext(connection) as ctx:
        status = get(url).status_code
    return status, sum('FROM "auth_group"' in q["sql"] for q in ctx.captured_queries)


def test_a_console_page_reads_its_users_roles_with_the_user(make_user, client):
    rita = make_user("rita", role="release-managers")
    client.force_login(rita)
    assert _group_queries(client.get, "/releases/") == (200, 0)
    assert 'data-testid="release-form"' in client.get("/releases/").content.decode()
    # A user in no group: no role (no start form), and still no query of its groups.
    client.force_login(make_user("nemo"))
    assert _group_queries(client.get, "/releases/") == (200, 0)
    assert 'data-testid="release-form"' not in client.get("/releases/").content.decode()


def test_the_session_users_roles_follow_its_groups(make_user):
    ada = make_user("ada", role="algorithm")
    Group.objects.get(name=Role.MANAGERS.value).user_set.add(ada)
    loaded = PoolFriendlyModelBackend().get_user(ada.pk)
    with CaptureQueriesContext(connection) as ctx:
        assert user_roles(loaded) == [Role.ALGORITHM.value, Role.MANAGERS.value]
        assert user_has_role(loaded, Role.MANAGERS.value)
        assert not user_has_role(loaded, Role.RELEASE_MANAGERS.value)
    assert len(ctx.captured_queries) == 0
    ada.is_active = False
    ada.save(update_fields=["is_active"])
    assert PoolFriendlyModelBackend().get_user(ada.pk) is None
    assert PoolFriendlyModelBackend().get_user(10**9) is None


def test_a_tokens_user_reads_its_roles_once(make_user):
    rita = make_user("rita", role="release-managers")
    _, secret = api_token_create(user=rita, name="ci")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert _group_queries(api.get, "/api/v1/models/") == (200, 0)  # no role check: no read
    # A release start checks her role (then refuses the empty body): one read of her groups.
    start = lambda url: api.post(url, {}, format="json")  # noqa: E731
    assert _group_queries(start, "/api/v1/releases/") == (400, 1)
    ada = make_user("ada", role="algorithm")
    _, other = api_token_create(user=ada, name="ci")
    api.credentials(HTTP_AUTHORIZATION=f"Token {other}")
    assert _group_queries(start, "/api/v1/releases/") == (403, 1)  # not her role
