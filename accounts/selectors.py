"""Reads of accounts."""

from django.db.models import QuerySet

from accounts.models import ApiToken


def api_tokens_of(*, user) -> QuerySet[ApiToken]:
    """A user's tokens, newest first (revoked and expired ones included)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")
