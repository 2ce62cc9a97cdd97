"""Work leases: how a RUNNING row tells "still being worked on" from "its worker died".

The task that runs a deployment or a benchmark holds a lease on its row: a thread of its own
sets the row's `heartbeat_at` every SWITCHYARD_WORK_LEASE_S / 4 seconds while the work runs.
A worker killed mid-run (SIGKILL, the OOM killer, a lost machine) stops beating; a RUNNING
row whose heartbeat is older than one lease has lost its worker, and the sweeps
(`deployments.sweep.deployments_lost_sweep`, `benchmarks.sweep.benchmarks_lost_sweep`)
finish it honestly. The heartbeat is a plain UPDATE of one column outside the work's own
transactions, so it never waits on the work and the work never waits on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

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
