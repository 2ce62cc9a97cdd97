"""The one way to record an audit event."""

from typing import Any

from django.db import models

from audit.models import AuditEvent


def audit_record(
    *,
    actor: Any | None,
    action: str,
    obj: models.Model | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one AuditEvent in the caller's transaction: it lands with the change or not at all."""
    is_user = actor is not None and getattr(actor, "is_authenticated", False)
    event = AuditEvent(
        actor=actor if is_user else None,
        actor_username=actor.get_username() if is_user else "",
        action=action,
        details=details or {},
    )
    if obj is not None:
        event.object_type = obj._meta.label_lower
        event.object_id = str(obj.pk)
        event.object_repr = str(obj)[:300]
    event.save()
    return event
