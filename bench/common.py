"""Set-up shared by the benches that create rows through the services.

Services queue Celery tasks when they commit (a smoke test per registered version, a run
per deployment, a tick per release action). A bench runs that work itself, so those tasks
go to a queue of their own, which no worker consumes and which is emptied at the end: on
the default queue a `make demo` worker would pick them up and look for rows of the bench's
throwaway database in its own.
"""

import os
from pathlib import Path

BENCH_QUEUE = "switchyard-bench"


def use_bench_queue() -> None:
    """Before django.setup(): tasks queued from here on go to the bench's own queue."""
    os.environ.setdefault("SWITCHYARD_CELERY_QUEUE", BENCH_QUEUE)


def drop_queued_tasks() -> int:
    """Discard what this bench queued on every lane's queue; how many messages went."""
    from controlplane.celery import app
    from controlplane.queues import all_queues

    dropped = 0
    queues = all_queues(app.conf.task_default_queue)
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in queues:
            dropped += channel.queue_purge(queue) or 0
        # The lanes' queues and their bindings go too: nothing of the bench stays in Redis.
        client = channel.client
        for queue in queues:
            client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    return dropped


def drop_own_traffic(cluster: str) -> None:
    """Delete the own-traffic counters of the bench's cluster's nodes (deployments/
    own_traffic.py; they would expire in two days)."""
    from core import redis_pool
    from deployments import own_traffic

    client = redis_pool.client()
    pattern = f"{own_traffic.key_prefix()}{cluster}{own_traffic.SEPARATOR}*"
    keys = list(client.scan_iter(pattern, count=1000))
    if keys:
        client.delete(*keys)


def wait_until(predicate, timeout_s: float, what: str = "", step: float = 0.1):
    """The first truthy value `predicate()` returns, polled every `step` s; RuntimeError
    naming `what` after `timeout_s`."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise RuntimeError(f"{what or 'the condition'}: not within {timeout_s} s")


def bench_node_key():
    """A new node key for a bench's own Triton nodes: they start with it (model control
    restricted, as in production) and the bench's clusters hold it. Call after django.setup()."""
    import secrets

    from django.conf import settings

    from integrations.triton.restricted import NodeKey

    return NodeKey(settings.SWITCHYARD_TRITON_KEY_HEADER, secrets.token_urlsafe(32))


DB_SERVER = "postgres://postgres@127.0.0.1:5432"


def throwaway_database(name: str, action: str) -> None:
    """Drop the bench's own database `name` (its connections cut), then create it again
    when `action` is "create"."""
    import psycopg

    with psycopg.connect(f"{DB_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if action == "create":
            conn.execute(f'CREATE DATABASE "{name}"')


def bench_redis(db: int):
    """A client of the bench's own Redis database."""
    import redis

    return redis.Redis.from_url(f"redis://127.0.0.1:6379/{db}")


def child_pids(pid: int) -> set[int]:
    """The processes `pid` started that still run (/proc), e.g. the web command's daphnes."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def cpu_seconds(root_pids: list[int]) -> float:
    """User + system CPU seconds of these processes and all their living descendants, now
    (read from /proc)."""
    parent, cpu = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    roots, total = set(root_pids), 0.0
    for pid, seconds in cpu.items():
        p = pid
        while p > 1:
            if p in roots:
                total += seconds
                break
            p = parent.get(p, 0)
    return total
