"""Webhook writes: create, update, delete. Release managers only; every write audited (the
secret never enters the audit row)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.roles import Role, user_has_role
from audit.services import audit_record
from core.sealed import seal
from deployments.validation import allowed_networks, own_service_endpoints
from integrations.targets import TargetError
from notifications.catalog import EVENTS, FORMATS, SEVERITIES
from notifications.models import Webhook
from notifications.sender import webhook_url

SECRET_MIN_LENGTH = 16
FIELDS = ("url", "secret", "events", "min_severity", "format", "description", "is_active")


class WebhookError(Exception):
    def __init__(self, message: str, *, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.field, self.status = message, field, status


def _check_actor(actor) -> None:
    if not user_has_role(actor, Role.RELEASE_MANAGERS.value):
        raise WebhookError("Webhooks are managed by release managers.", status=403)


def _checked(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields as stored; WebhookError naming the first refused one."""
    out = dict(fields)
    if "url" in fields:
        try:
            out["url"] = webhook_url(fields["url"], allowed_networks(), own_service_endpoints())
        except TargetError as exc:
            raise WebhookError(str(exc), field="url") from None
    if "secret" in fields:
        secret = out.pop("secret")
        if not isinstance(secret, str) or len(secret) < SECRET_MIN_LENGTH:
            raise WebhookError(f"At least {SECRET_MIN_LENGTH} characters.", field="secret")
        out["secret_sealed"] = seal(secret)  # stored encrypted only
    if "events" in fields:
        events = fields["events"]
        if not events or any(e not in EVENTS for e in events):
            raise WebhookError(f"A non-empty list of: {', '.join(EVENTS)}.", field="events")
        out["events"] = sorted(set(events), key=EVENTS.index)
    if fields.get("min_severity", SEVERITIES[0]) not in SEVERITIES:
        raise WebhookError(f"One of: {', '.join(SEVERITIES)}.", field="min_severity")
    if fields.get("format", FORMATS[0]) not in FORMATS:
        raise WebhookError(f"One of: {', '.join(FORMATS)}.", field="format")
    return out


def _described(hook: Webhook) -> dict[str, Any]:
    return {
        "host": hook.host,  # never the URL: its path or query may be the receiver's secret
        "events": hook.events,
        "min_severity": hook.min_severity,
        "format": hook.format,
        "is_active": hook.is_active,
    }


def webhook_create(*, actor, url: str, secret: str, events: list[str], **extra: Any) -> Webhook:
    """A new webhook; it is told about events that happen from now on."""
    _check_actor(actor)
    unknown = set(extra) - set(FIELDS)
    if unknown:
        raise WebhookError("Unknown field.", field=sorted(unknown)[0])
    fields = _checked({"url": url, "secret": secret, "events": events, **extra})
    with transaction.atomic():
        hook = Webhook.objects.create(created_by=actor, **fields)
        audit_record(actor=actor, action="webhook.created", obj=hook, details=_described(hook))
    return hook


def webhook_update(*, webhook: Webhook, actor, **fields: Any) -> Webhook:
    """Change some fields (a new secret signs the next attempt on); audited."""
    _check_actor(actor)
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise WebhookError("Unknown field.", field=sorted(unknown)[0])
    changed = sorted(fields)  # the names the caller gave ("secret", not its sealed column)
    fields = _checked(fields)
    with transaction.atomic():
        hook = Webhook.objects.select_for_update().get(pk=webhook.pk)
        if fields.get("is_active") and not hook.is_active:
            hook.active_since = timezone.now()  # what happened while paused is not sent
        for name, value in fields.items():
            setattr(hook, name, value)
        hook.save()
        details = {**_described(hook), "changed": changed}
        audit_record(actor=actor, action="webhook.updated", obj=hook, details=details)
    return hook


def webhook_delete(*, webhook: Webhook, actor) -> None:
    """Delete a webhook and its delivery log; audited."""
    _check_actor(actor)
    with transaction.atomic():
        details = _described(webhook)
        audit_record(actor=actor, action="webhook.deleted", obj=webhook, details=details)
        webhook.delete()
