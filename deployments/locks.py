"""PostgreSQL advisory locks: one holder at a time for work that must not run twice at once
(a reconcile pass per cluster, a release tick), held outside any transaction."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def advisory_lock(namespace: int, key: int) -> Iterator[bool]:
    """Yield True when the lock was taken (released on exit), False when someone holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [namespace, key])
        taken = bool(cursor.fetchone()[0])
    try:
        yield taken
    finally:
        if taken:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace, key])
