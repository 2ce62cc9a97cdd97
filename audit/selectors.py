"""Reads of the audit trail."""

from django.db.models import QuerySet

from audit.models import AuditEvent


def audit_events_for(*, object_type: str, object_id: str) -> QuerySet[AuditEvent]:
    """Events about one object, newest first."""
    return AuditEvent.objects.filter(object_type=object_type, object_id=str(object_id))


def audit_events_recent(*, limit: int = 50) -> QuerySet[AuditEvent]:
    """The latest events across the system, newest first."""
    return AuditEvent.objects.all()[:limit]


def audit_events_filtered(
    *,
    actor: str = "",
    object_type: str = "",
    object_id: str = "",
    action: str = "",
    since=None,
    until=None,
) -> QuerySet[AuditEvent]:
    """Events newest first, narrowed by actor name (exact; "system" for no user), object
    type and id, action (exact, or a prefix ending in "."), and a time range [since, until)."""
    qs = AuditEvent.objects.all()
    if actor:
        qs = qs.filter(actor_username="" if actor == "system" else actor)
    if object_type:
        qs = qs.filter(object_type=object_type)
    if object_id:
        qs = qs.filter(object_id=object_id)
    if action:
        qs = (
            qs.filter(action__startswith=action)
            if action.endswith(".")
            else qs.filter(action=action)
        )
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if until is not None:
        qs = qs.filter(created_at__lt=until)
    return qs


def audit_choices() -> dict:
    """Actors, object types and actions that occur, for the audit page's filters."""

    def distinct(field: str) -> list[str]:
        return sorted(set(AuditEvent.objects.values_list(field, flat=True).distinct()))

    return {
        "actors": [a or "system" for a in distinct("actor_username")],
        "object_types": [t for t in distinct("object_type") if t],
        "actions": distinct("action"),
    }
