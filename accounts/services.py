"""Writes of accounts: API tokens (create, use, revoke) and websocket tickets."""

import hashlib
import logging
import secrets
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import ApiToken
from audit.services import audit_record

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "sy_"  # noqa: S105 - a public marker, not a secret
PREFIX_LENGTH = 10
# last_used_at is written at most this often per token (not on every request).
LAST_USED_RESOLUTION = timedelta(minutes=1)


def secret_digest(secret: str) -> str:
    """sha256 hex of a token or ticket: what is stored and looked up, never the secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def token_group(token_id: int) -> str:
    """The channel-layer group of the websockets opened with one token (closed on revoke)."""
    return f"auth-token-{token_id}"


@transaction.atomic
def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """A new token of `user`; returns the row and the secret, which only the caller sees."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    lifetime = timedelta(days=settings.SWITCHYARD_API_TOKEN_TTL_DAYS)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=secret[:PREFIX_LENGTH],
        digest=secret_digest(secret),
        expires_at=timezone.now() + lifetime,
    )
    details = {"token_id": token.pk, "name": name, "prefix": token.prefix}
    audit_record(actor=user, action="auth.token_created", obj=user, details=details)
    return token, secret


def api_token_use(*, secret: str) -> ApiToken | None:
    """The active token with this secret (its user loaded), or None; notes when it was used."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=secret_digest(secret), revoked_at__isnull=True)
        .first()
    )
    now = timezone.now()
    if token is None or token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def api_token_revoke(*, token: ApiToken, actor) -> ApiToken:
    """Revoke at once: requests with it are refused and its open websockets are closed."""
    with transaction.atomic():
        changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        token.refresh_from_db()
        if changed:
            details = {"token_id": token.pk, "name": token.name, "prefix": token.prefix}
            audit_record(actor=actor, action="auth.token_revoked", obj=token.user, details=details)
            transaction.on_commit(partial(_close_token_sockets, token.pk))
    return token


def api_tokens_prune() -> int:
    """Delete tokens expired or revoked more than SWITCHYARD_API_TOKEN_KEEP_DAYS ago."""
    cutoff = timezone.now() - timedelta(days=settings.SWITCHYARD_API_TOKEN_KEEP_DAYS)
    old = ApiToken.objects.filter(Q(expires_at__lt=cutoff) | Q(revoked_at__lt=cutoff))
    deleted, _ = old.delete()
    return deleted


def _close_token_sockets(token_id: int) -> None:
    """Tell the websockets opened with this token to close (accounts/ws_auth.py)."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    try:
        async_to_sync(layer.group_send)(token_group(token_id), {"type": "auth.revoked"})
    except Exception:  # the revocation is committed; new connects are refused regardless
        logger.warning(
            "Could not close the websockets of revoked token %s", token_id, exc_info=True
        )


def _ticket_key(ticket: str) -> str:
    return f"ws-ticket:{secret_digest(ticket)}"


def ws_ticket_create(*, user, token: ApiToken | None) -> tuple[str, datetime]:
    """A single-use websocket ticket for `user`, bound to the token that asked (if any)."""
    ttl = settings.SWITCHYARD_WS_TICKET_TTL_S
    ticket = secrets.token_urlsafe(32)
    value = {"user_id": user.pk, "token_id": token.pk if token else None}
    cache.set(_ticket_key(ticket), value, timeout=ttl)
    return ticket, timezone.now() + timedelta(seconds=ttl)


def ws_ticket_redeem(*, ticket: str) -> tuple[object, int | None] | None:
    """(user, token id) of a valid ticket, consumed by this call; None if unknown or used.

    A ticket minted with a token dies with it: the token must still be active now.
    """
    key = _ticket_key(ticket)
    value = cache.get(key)
    if value is None or not cache.delete(key):  # delete() is true for one caller only
        return None
    user = get_user_model().objects.filter(pk=value["user_id"], is_active=True).first()
    token_id = value["token_id"]
    if user is None:
        return None
    if token_id is not None:
        now = timezone.now()
        alive = ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True, expires_at__gt=now)
        if not alive.exists():
            return None
    return user, token_id


def signin_failed(*, request, username: str, via: str) -> None:
    """Count a failed sign-in for throttling and leave an audit row (no password, no token)."""
    from accounts.client_ip import client_ip
    from accounts.signin_throttle import signin_failure_record

    signin_failure_record(request, username)
    details = {"username": username[:150], "ip": client_ip(request), "via": via}
    audit_record(actor=None, action="auth.sign_in_failed", details=details)


def signin_refused(*, request, username: str, via: str) -> None:
    """Audit a sign-in refused because of too many failures (not counted again)."""
    from accounts.client_ip import client_ip

    details = {"username": username[:150], "ip": client_ip(request), "via": via}
    audit_record(actor=None, action="auth.sign_in_throttled", details=details)
