"""Set-up shared by the benches that create rows through the services.

Services queue Celery tasks when they commit (a smoke test per registered version, a run
per deployment, a tick per release action). A bench runs that work itself, so those tasks
go to a queue of their own, which no worker consumes and which is emptied at the end: on
the default queue a `make demo` worker would pick them up and look for rows of the bench's
throwaway database in its own.
"""

import os

BENCH_QUEUE = "switchyard-bench"


def use_bench_queue() -> None:
    """Before django.setup(): tasks queued from here on go to the bench's own queue."""
    os.environ.setdefault("SWITCHYARD_CELERY_QUEUE", BENCH_QUEUE)


def drop_queued_tasks() -> int:
    """Discard what this bench queued; how many messages went."""
    from controlplane.celery import app

    return app.control.purge() or 0
