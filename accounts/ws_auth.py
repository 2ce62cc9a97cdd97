"""Websocket auth: the browser's session, or `?ticket=<ticket>` for scripts.

A ticket (POST /api/v1/auth/ws-ticket/) is single-use and short-lived, so the query string
that access logs print holds nothing reusable. A socket opened with a ticket minted from an
API token is closed (code 4401) as soon as that token is revoked.
"""

import asyncio
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.middleware import BaseMiddleware
from django.contrib.auth.models import AnonymousUser

from accounts.services import token_group, ws_ticket_redeem

REVOKED = 4401


@database_sync_to_async
def _redeem(ticket: str):
    return ws_ticket_redeem(ticket=ticket)


class TicketAuthMiddleware(BaseMiddleware):
    """Sets scope["user"] from a `ticket` query parameter when one is given."""

    async def __call__(self, scope, receive, send):
        tickets = parse_qs(scope.get("query_string", b"").decode()).get("ticket")
        if not tickets:
            return await super().__call__(scope, receive, send)
        user, token_id = await _redeem(tickets[0]) or (AnonymousUser(), None)
        scope = dict(scope, user=user, auth_token_id=token_id)
        if token_id is None:
            return await self.inner(scope, receive, send)
        return await _closed_on_revoke(token_id, self.inner, scope, receive, send)


async def _closed_on_revoke(token_id: int, app, scope, receive, send):
    """Run the consumer; a message to the token's group closes the socket and ends it."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(token_group(token_id), channel)
    revoked = asyncio.ensure_future(layer.receive(channel))

    async def guarded_receive():
        incoming = asyncio.ensure_future(receive())
        await asyncio.wait({incoming, revoked}, return_when=asyncio.FIRST_COMPLETED)
        if incoming.done():
            return incoming.result()
        incoming.cancel()
        await send({"type": "websocket.close", "code": REVOKED})
        return {"type": "websocket.disconnect", "code": REVOKED}

    try:
        return await app(scope, guarded_receive, send)
    finally:
        revoked.cancel()
        await layer.group_discard(token_group(token_id), channel)


def TicketOrSessionAuthMiddlewareStack(inner):  # noqa: N802 - mirrors Channels' naming
    """Session auth first; a query ticket, when present, takes precedence."""
    return AuthMiddlewareStack(TicketAuthMiddleware(inner))
