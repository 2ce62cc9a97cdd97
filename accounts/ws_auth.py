"""Websocket auth: the browser's session, or `?token=<key>` for scripts."""

from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.contrib.auth.models import AnonymousUser


@database_sync_to_async
def _user_for_token(key: str):
    from rest_framework.authtoken.models import Token

    try:
        token = Token.objects.select_related("user").get(key=key)
    except Token.DoesNotExist:
        return AnonymousUser()
    return token.user if token.user.is_active else AnonymousUser()


class QueryTokenAuthMiddleware(BaseMiddleware):
    """Sets scope["user"] from a `token` query parameter when one is given."""

    async def __call__(self, scope, receive, send):
        query = parse_qs(scope.get("query_string", b"").decode())
        keys = query.get("token")
        if keys:
            scope = dict(scope, user=await _user_for_token(keys[0]))
        return await super().__call__(scope, receive, send)


def TokenOrSessionAuthMiddlewareStack(inner):  # noqa: N802 - mirrors Channels' naming
    """Session auth first; a query token, when present, takes precedence."""
    return AuthMiddlewareStack(QueryTokenAuthMiddleware(inner))
