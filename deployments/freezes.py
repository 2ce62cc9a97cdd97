"""Freeze windows and emergency overrides: declared, checked, and read for pages.

`cluster_frozen(cluster_name)` is the one check every start and advance asks (a release's
start, each step it enters, a plan's next wave): '' when the cluster may change now, else why
not. A freeze holds unless an override of that cluster is in force: asked with a reason by one
release manager and approved by another (never the same person), for a number of hours. Every
change is audited.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.errors import Forbidden, Refused
from audit.services import audit_record
from deployments.freeze_windows import Window, describe, frozen_until, upcoming
from deployments.models import FreezeOverride, FreezeWindow, TritonCluster

MAX_OVERRIDE_HOURS = 24.0
MAX_REASON = 300


def _window(row: FreezeWindow) -> Window:
    return Window(
        id=row.pk, reason=row.reason, cluster=row.cluster.name if row.cluster else None,
        timezone=row.timezone, starts_at=row.starts_at, ends_at=row.ends_at,
        weekdays=tuple(row.weekdays or ()), start=row.start, end=row.end,
    )  # fmt: skip


def _windows(cluster_name: str | None = None) -> list[Window]:
    rows = FreezeWindow.objects.select_related("cluster")
    if cluster_name is not None:
        rows = rows.filter(cluster__isnull=True) | rows.filter(cluster__name=cluster_name)
    return [_window(r) for r in rows]


def _in_force(now: datetime) -> Q:
    """An override approved and not yet expired at `now`."""
    return Q(approved_at__isnull=False, expires_at__gt=now)


def override_in_force(cluster_name: str, now: datetime | None = None) -> FreezeOverride | None:
    now = now or timezone.now()
    return (
        FreezeOverride.objects.filter(_in_force(now), cluster__name=cluster_name)
        .order_by("-expires_at")
        .first()
    )


def cluster_frozen(cluster_name: str, now: datetime | None = None) -> str:
    """Why `cluster_name` may not start or advance a change now ('' when it may)."""
    now = now or timezone.now()
    return _frozen_text(
        _windows(cluster_name), cluster_name, now, lambda: override_in_force(cluster_name, now)
    )


def _frozen_text(
    windows: list[Window], cluster_name: str, now: datetime, in_force: Callable[[], object]
) -> str:
    """`cluster_frozen`'s answer from the windows read; `in_force()` (the override in force,
    or None) is asked only while a window holds."""
    held = frozen_until(windows, cluster_name, now)
    if held is None or in_force() is not None:
        return ""
    window, until = held
    return f"{cluster_name} is {describe(window, until)}"


def cluster_freeze_view(cluster_name: str, now: datetime | None = None) -> dict:
    """What the cluster's page shows of its freezes, from one read of the windows and one of
    the overrides: {"freezes": those holding now or coming next (`_upcoming_rows`), "frozen":
    `cluster_frozen`'s answer, "overrides": `freeze_overrides_open`'s}."""
    now = now or timezone.now()
    windows, overrides = _windows(cluster_name), freeze_overrides_open(cluster_name, now)
    approved = [o for o in overrides if o.approved_at is not None]  # the open ones are in force
    return {
        "freezes": _upcoming_rows(windows, cluster_name, now),
        "frozen": _frozen_text(windows, cluster_name, now, lambda: approved or None),
        "overrides": overrides,
    }


def cluster_freezes(cluster_name: str, now: datetime | None = None, limit: int = 5) -> list[dict]:
    """The cluster's freezes holding now or coming next (pages and the API), as
    `_upcoming_rows` gives them."""
    now = now or timezone.now()
    return _upcoming_rows(_windows(cluster_name), cluster_name, now, limit)


def _upcoming_rows(
    windows: list[Window], cluster_name: str, now: datetime, limit: int = 5
) -> list[dict]:
    """The cluster's freezes holding now or coming next: {id, reason, start, end, now,
    fleet_wide, timezone}."""
    return [
        {
            "id": w.id,
            "reason": w.reason,
            "start": start,
            "end": end,
            "now": start <= now < end,
            "fleet_wide": w.cluster is None,
            "timezone": w.timezone,
        }  # fmt: skip
        for w, start, end in upcoming(windows, cluster_name, now, limit)
    ]


def _zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise Refused(f"Unknown time zone '{name}' (an IANA name: Europe/Berlin, UTC).",
                      field="timezone") from None  # fmt: skip
    return name


def freeze_window_create(
    *,
    actor,
    reason: str,
    cluster: TritonCluster | None = None,
    tz: str = "UTC",
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    weekdays: list[int] | None = None,
    start: time | None = None,
    end: time | None = None,
) -> FreezeWindow:
    """A dated window (starts_at, ends_at) or a weekly one (weekdays, start, end in `tz`)."""
    reason = (reason or "").strip()
    if not reason:
        raise Refused("A freeze says why (reason).", field="reason")
    dated, weekly = starts_at is not None or ends_at is not None, bool(weekdays)
    if dated == weekly:
        raise Refused("A freeze is dated (starts_at and ends_at) or weekly (weekdays, start, "
                      "end), one of the two.", field="starts_at")  # fmt: skip
    if dated:
        if starts_at is None or ends_at is None or ends_at <= starts_at:
            raise Refused("ends_at must come after starts_at.", field="ends_at")
    else:
        if any(d not in range(7) for d in weekdays) or start is None or end is None:
            raise Refused("Weekdays are 0 (Monday) to 6, with a start and an end time.",
                          field="weekdays")  # fmt: skip
        if start == end:
            raise Refused("A weekly freeze's end differs from its start.", field="end")
    with transaction.atomic():
        row = FreezeWindow.objects.create(
            cluster=cluster, reason=reason[:MAX_REASON], timezone=_zone(tz), starts_at=starts_at,
            ends_at=ends_at, weekdays=sorted(set(weekdays or [])), start=start, end=end,
            created_by=actor,
        )  # fmt: skip
        details = {"cluster": cluster.name if cluster else None, "reason": row.reason}
        audit_record(actor=actor, action="freeze.created", obj=row, details=details)
    return row


def freeze_window_delete(*, actor, window: FreezeWindow) -> None:
    with transaction.atomic():
        details = {"cluster": window.cluster.name if window.cluster else None,
                   "reason": window.reason}  # fmt: skip
        audit_record(actor=actor, action="freeze.deleted", obj=window, details=details)
        window.delete()


def freeze_override_request(*, actor, cluster: TritonCluster, reason: str, hours: float):
    """An emergency override of `cluster`'s freezes, waiting for a second release manager."""
    reason = (reason or "").strip()
    if not reason:
        raise Refused("An override says why (reason): it is audited.", field="reason")
    if not 0 < hours <= MAX_OVERRIDE_HOURS:
        raise Refused(f"An override lasts 0 to {MAX_OVERRIDE_HOURS:g} hours.", field="hours")
    with transaction.atomic():
        row = FreezeOverride.objects.create(cluster=cluster, reason=reason, hours=hours,
                                            requested_by=actor)  # fmt: skip
        details = {"cluster": cluster.name, "reason": reason, "hours": hours}
        audit_record(actor=actor, action="freeze.override_requested", obj=row, details=details)
    return row


def freeze_override_approve(*, actor, override: FreezeOverride) -> FreezeOverride:
    """In force from now for its hours; never approved by who asked for it (403)."""
    with transaction.atomic():
        row = FreezeOverride.objects.select_for_update().get(pk=override.pk)
        if row.requested_by_id == actor.pk:
            raise Forbidden("A second release manager approves an override, not who asked for it.")
        if row.approved_at is not None:
            raise Refused("This override was approved already.", status=409)
        now = timezone.now()
        row.approved_by, row.approved_at = actor, now
        row.expires_at = now + timedelta(hours=row.hours)
        row.save(update_fields=["approved_by", "approved_at", "expires_at"])
        audit_record(actor=actor, action="freeze.override_approved", obj=row,
                     details={"cluster": row.cluster.name, "reason": row.reason,
                              "until": row.expires_at.isoformat()})  # fmt: skip
    return row


def freeze_overrides_open(cluster_name: str, now: datetime | None = None) -> list[FreezeOverride]:
    """The cluster's overrides asked in the last day and not approved, and the one in force."""
    now = now or timezone.now()
    rows = FreezeOverride.objects.filter(cluster__name=cluster_name).select_related(
        "requested_by", "approved_by"
    )
    waiting = rows.filter(approved_at__isnull=True, created_at__gt=now - timedelta(days=1))
    return list(waiting | rows.filter(_in_force(now)))
