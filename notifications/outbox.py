"""The outbox scanner: new audit rows and release events become deliveries, once per
(webhook, source row) whatever how often or how concurrently it runs.

Each source has a cursor (the highest id read). Ids are handed out when a row is inserted,
not when its transaction commits, so a row can become visible after a higher id was read:
every scan also re-reads the rows of the last SWITCHYARD_WEBHOOK_LOOKBACK_S seconds below
the cursor, and the unique (webhook, source, source_id) constraint drops what is already
there. One scanner at a time (an advisory lock); a second one returns at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from audit.models import AuditEvent
from deployments.locks import advisory_lock
from notifications.catalog import (
    AUDIT_EVENTS,
    RELEASE_EVENT_KINDS,
    Note,
    note_from_audit,
    note_from_release_event,
    wants,
)
from notifications.models import Delivery, OutboxCursor, Webhook
from releases.models import ReleaseEvent

LOCK_NAMESPACE = 7320  # advisory lock key space of the outbox scanner (one key)
BATCH = 500
REQUEUE_AFTER_S = 60.0  # a queued attempt that has not run this long after it was due


def _audit_rows(qs: QuerySet) -> list[dict]:
    return [
        {
            "source": "audit",
            "id": e.pk,
            "action": e.action,
            "object_id": e.object_id,
            "object_repr": e.object_repr,
            "actor": e.actor_username,
            "details": e.details,
            "created_at": e.created_at,
        }
        for e in qs
    ]


def _release_rows(qs: QuerySet) -> list[dict]:
    qs = qs.select_related("release__model", "release__cluster")
    qs = qs.select_related("release__baseline", "release__candidate")
    return [
        {
            "source": "release_event",
            "id": e.pk,
            "kind": e.kind,
            "phase": e.phase,
            "message": e.message,
            "data": e.data,
            "created_at": e.created_at,
            "release": {
                "id": e.release_id,
                "model": e.release.model.name,
                "cluster": e.release.cluster.name,
                "baseline_version": e.release.baseline.version,
                "candidate_version": e.release.candidate.version,
                "actor": e.actor,
            },
        }
        for e in qs
    ]


SOURCES: dict[str, tuple[Callable[[], QuerySet], Callable, Callable]] = {
    "audit": (
        lambda: AuditEvent.objects.filter(action__in=list(AUDIT_EVENTS)),
        _audit_rows,
        note_from_audit,
    ),
    "release_event": (
        lambda: ReleaseEvent.objects.filter(kind__in=RELEASE_EVENT_KINDS),
        _release_rows,
        note_from_release_event,
    ),
}


def _read(source: str, since: datetime, *, anyone: bool) -> list[tuple[Note, datetime]]:
    """The source's rows past its cursor (a batch) and its late rows; moves the cursor.
    Without any active webhook (`anyone` false) it only moves the cursor to the end."""
    base, rows_of, note_of = SOURCES[source]
    cursor, created = OutboxCursor.objects.select_for_update().get_or_create(source=source)
    if created or not anyone:  # a first scan starts now: history is not replayed
        cursor.last_id = base().model.objects.aggregate(m=Max("id"))["m"] or 0
    if not anyone:
        cursor.save()
        return []
    new = rows_of(base().filter(id__gt=cursor.last_id).order_by("id")[:BATCH])
    late = rows_of(base().filter(id__lte=cursor.last_id, created_at__gte=since).order_by("id"))
    if new:
        cursor.last_id = new[-1]["id"]
    cursor.save()
    out = []
    for row in late + new:
        at = row["created_at"]
        note = note_of({**row, "created_at": at.isoformat()})
        if note is not None:
            out.append((note, at))
    return out


def _deliveries(hooks: list[Webhook], notes: Iterable[tuple[Note, datetime]], now) -> list:
    notes = list(notes)
    if not notes:
        return []
    seen = set(
        Delivery.objects.filter(
            source=notes[0][0].source, source_id__in=[n.source_id for n, _ in notes]
        ).values_list("webhook_id", "source_id")
    )
    return [
        Delivery(
            webhook=hook,
            event=note.event,
            severity=note.severity,
            source=note.source,
            source_id=note.source_id,
            payload=note.payload(),
            next_attempt_at=now,
        )
        for note, at in notes
        for hook in hooks
        if at >= hook.active_since
        and (hook.pk, note.source_id) not in seen
        and wants(events=hook.events, min_severity=hook.min_severity, note=note)
    ]


def _due(now: datetime) -> list[int]:
    """Deliveries whose attempt should be queued now: new ones, and ones whose queued task
    has not run a while after it was due (a lost message, a worker killed mid-attempt)."""
    stale = now - timedelta(seconds=REQUEUE_AFTER_S)
    unqueued = Q(queued_at__isnull=True) | Q(queued_at__lt=stale)
    pending = Q(status=Delivery.Status.PENDING) & unqueued
    abandoned = Q(status=Delivery.Status.SENDING, claimed_until__lt=now, queued_at__lt=stale)
    qs = Delivery.objects.filter(pending | abandoned, next_attempt_at__lte=now)
    ids = list(qs.order_by("next_attempt_at", "id").values_list("id", flat=True)[:BATCH])
    Delivery.objects.filter(id__in=ids).update(queued_at=now)
    return ids


def outbox_scan() -> list[int]:
    """Record a delivery for each (active webhook, new matching source row) exactly once and
    return the ids of the deliveries to queue an attempt for ([] when another scan runs)."""
    with advisory_lock(LOCK_NAMESPACE, 0) as taken:
        if not taken:
            return []
        now = timezone.now()
        since = now - timedelta(seconds=settings.SWITCHYARD_WEBHOOK_LOOKBACK_S)
        hooks = list(Webhook.objects.filter(is_active=True))
        with transaction.atomic():
            for source in SOURCES:
                rows = _deliveries(hooks, _read(source, since, anyone=bool(hooks)), now)
                Delivery.objects.bulk_create(rows, ignore_conflicts=True)
            return _due(now)
