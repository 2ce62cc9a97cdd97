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
