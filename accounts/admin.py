"""Superusers see every user's API tokens (never a secret) and can revoke them."""

from django.contrib import admin

from accounts.models import ApiToken
from accounts.services import api_token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "user",
        "prefix",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = list_display
    exclude = ["digest"]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False  # tokens are made by their owner, who alone sees the secret

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(token=token, actor=request.user)
