"""Audit tasks: let background work leave a system event in the trail."""

import socket

from celery import shared_task

from audit.services import audit_record


@shared_task(name="audit.record_system_event", soft_time_limit=10, time_limit=20)
def record_system_event(action: str, details: dict | None = None) -> int:
    """Append a system AuditEvent (no actor) tagged with the worker host; returns its id."""
    event = audit_record(
        actor=None,
        action=action,
        details={**(details or {}), "worker_host": socket.gethostname()},
    )
    return event.pk
