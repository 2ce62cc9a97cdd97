"""Work leases: how a RUNNING row tells "still being worked on" from "its worker died".

The task that runs a deployment or a benchmark holds a lease on its row: a thread of its own
sets the row's `heartbeat_at` every SWITCHYARD_WORK_LEASE_S / 4 seconds while the work runs.
A worker killed mid-run (SIGKILL, the OOM killer, a lost machine) stops beating; a RUNNING
row whose heartbeat is older than one lease has lost its worker, and the sweeps
(`deployments.sweep.deployments_lost_sweep`, `benchmarks.sweep.benchmarks_lost_sweep`)
finish it honestly. The heartbeat is a plain UPDATE of one column outside the work's own
transactions, so it never waits on the work and the work never waits on it.

A row whose task could not be queued at all (the broker, Redis, out of reach when the request
committed) is kept PENDING with `unqueued_since` set, and the same sweeps queue it again once
the broker answers (`enqueue_or_mark`, `requeue_unqueued`): the request that made it never
fails for it, and nothing it asked for is lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import kombu.exceptions
import redis
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

log = logging.getLogger(__name__)


def lease_s() -> float:
    return float(settings.SWITCHYARD_WORK_LEASE_S)


@contextmanager
def lease_held(rows: QuerySet, *, what: str) -> Iterator[None]:
    """While the block runs, `rows` (a queryset of one row) get `heartbeat_at = now` every
    lease / 4 seconds from a thread of their own (its database connection closed after)."""
    stop = threading.Event()
    every = max(lease_s() / 4, 0.2)

    def beat() -> None:
        try:
            while not stop.wait(every):
                rows.update(heartbeat_at=timezone.now())
        except Exception:  # a missed beat only shortens the lease; the work goes on
            log.exception("heartbeat of %s failed", what)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"lease {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)


def lost(rows: QuerySet, *, now: datetime | None = None) -> QuerySet:
    """The RUNNING rows of `rows` whose lease ran out: no heartbeat (or start, for a row that
    never beat) within the last lease."""
    cutoff = (now or timezone.now()) - timedelta(seconds=lease_s())
    return rows.filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )


def sweep_lost(rows: QuerySet, finish: Callable, *, related: tuple[str, ...] = ()) -> list:
    """Finish every row of `rows` (the RUNNING ones) whose lease ran out, each by
    `finish(row, now)` in a transaction of its own under the row's lock, re-checked once
    locked (a worker that beat again, or a second sweep holding the row, leaves it); the
    rows finished."""
    done = []
    for pk in lost(rows).values_list("pk", flat=True):
        now = timezone.now()
        with transaction.atomic():
            row = (
                rows.select_for_update(of=("self",), skip_locked=True)
                .select_related(*related)
                .filter(pk=pk)
                .first()
            )
            if row is None or not lost(rows.filter(pk=pk), now=now).exists():
                continue
            finish(row, now)
        done.append(row)
    return done


def lost_reason(row, *, now: datetime | None = None) -> str:
    """The failure text of a row whose worker was lost, with when it was last heard of."""
    last = row.heartbeat_at or row.started_at
    quiet = ((now or timezone.now()) - last).total_seconds() if last else None
    since = f" for {quiet:.0f} s (last at {last:%H:%M:%S} UTC)" if quiet is not None else ""
    return (
        f"The worker running it stopped: no heartbeat{since}, more than the "
        f"{lease_s():g} s lease (SWITCHYARD_WORK_LEASE_S)."
    )


# What a task's .delay() raises while the broker (Redis) is out of reach.
BROKER_ERRORS = (kombu.exceptions.OperationalError, redis.ConnectionError, redis.TimeoutError)


def enqueue_or_mark(send: Callable[[int], object], rows: QuerySet, pk: int, *, what: str) -> bool:
    """`send(pk)` (a task's delay); with the broker out of reach, the row is marked
    `unqueued_since` for the sweep instead of failing the caller. True when queued."""
    try:
        send(pk)
    except BROKER_ERRORS as exc:
        log.warning("%s %s not queued, the sweep queues it later: %s", what, pk, exc)
        rows.filter(pk=pk, unqueued_since__isnull=True).update(unqueued_since=timezone.now())
        return False
    return True


def requeue_unqueued(rows: QuerySet, send: Callable[[int], object], *, what: str) -> list[int]:
    """Queue again every row of `rows` (the PENDING ones) that was marked unqueued; a row
    whose send fails again stays marked for the next sweep. The ids queued. The mark is
    cleared by id alone: a worker may have taken the task (the row no longer PENDING)
    before the clear, and a cleared row must not stay marked."""
    queued = []
    every = rows.model._default_manager
    for pk in rows.filter(unqueued_since__isnull=False).values_list("pk", flat=True):
        try:
            send(pk)
        except BROKER_ERRORS as exc:
            log.warning("%s %s still not queued: %s", what, pk, exc)
            break  # the broker is still out of reach: the next sweep tries again
        every.filter(pk=pk).update(unqueued_since=None)
        queued.append(pk)
    return queued
