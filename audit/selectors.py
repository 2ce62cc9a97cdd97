"""Reads of the audit trail."""

from django.db.models import QuerySet

from audit.models import AuditEvent


def audit_events_for(*, object_type: str, object_id: str) -> QuerySet[AuditEvent]:
    """Events about one object, newest first."""
    return AuditEvent.objects.filter(object_type=object_type, object_id=str(object_id))


def audit_events_recent(*, limit: int = 50) -> QuerySet[AuditEvent]:
    """The latest events across the system, newest first."""
    return AuditEvent.objects.all()[:limit]
