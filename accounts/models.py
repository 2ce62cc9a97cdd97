"""API tokens: only a digest of the secret is stored; each token expires and can be revoked."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """One named token of a user. The secret is shown once, at creation, and never stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The first characters of the token, kept in clear so people can tell tokens apart.
    prefix = models.CharField(max_length=16)
    # sha256 hex of the whole token: the secret has 256 bits, so no salt or slow hash is needed.
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()


class IdempotencyKey(models.Model):
    """The stored answer to a POST sent with an `Idempotency-Key` header (API.md, Retries).

    A retry with the same key, user and request fingerprint gets `status`/`body` replayed;
    a row with `status` null is a request still running. Pruned after
    SWITCHYARD_IDEMPOTENCY_KEY_HOURS by `accounts.idempotency_keys_prune`.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="idempotency_keys"
    )
    key = models.CharField(max_length=255)
    # sha256 hex of method, path and body: a different request under the same key is a 409.
    fingerprint = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.status or 'running'})"
