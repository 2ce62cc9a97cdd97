"""PostgreSQL advisory locks: one holder at a time for work that must not run twice at once
(a reconcile pass per cluster, a release tick, a change of a cluster's router), held outside
any transaction.

Every advisory lock Switchyard takes is keyed (namespace, key); the namespaces are this
table below, the one place a new one is added (two kinds of work sharing a number would
block each other).
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

RECONCILE = 7301  # one reconcile pass per cluster (key: cluster id)
RELEASE_TICK = 7302  # one tick per release (key: release id)
ROUTER_CHANGE = 7303  # one change of a cluster's router at a time (key: cluster id)
SERVING_LOAD = 7304  # one serving-set load per release at a time (key: release id)
SMOKE_NODE = 7305  # one smoke loading models under their own names per node (key: node id)


@contextmanager
def advisory_lock(namespace: int, key: int, *, wait: bool = False) -> Iterator[bool]:
    """Yield True when the lock was taken (released on exit), False when someone holds it;
    with `wait`, wait for the holder instead (for short work such as a router reload)."""
    with connection.cursor() as cursor:
        if wait:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [namespace, key])
            taken = True
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [namespace, key])
            taken = bool(cursor.fetchone()[0])
    try:
        yield taken
    finally:
        if taken:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace, key])
