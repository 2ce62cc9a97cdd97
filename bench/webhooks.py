"""Webhook delivery: time from an event's row to the receiver, and what an outbox scan costs.

Prints, measured in this one run:
1. per round (default 20), seconds from the commit of an `alert.fired` audit row (what the
   health app writes when an alert fires) to its signed POST arriving at a real local HTTP
   receiver, through a real Celery worker and a beat-like loop queueing the outbox scan
   every 2 s; then n, median, p95 and max (goal: at most the 2 s scan interval + 1 s, so
   the webhook adds at most ~3 s to an alert's detection time);
2. per round (5 each), the CPU ms, wall ms and SQL queries of one outbox scan with 10 active
   webhooks over a 20,000-row audit trail of other actions: with no new row, and with 100
   new alert rows (1,000 deliveries recorded); and the ratio of the busy scan's CPU to the
   idle one's.
Runs on a throwaway database (created and dropped here) and a Celery queue of its own.
Usage: .venv/bin/python bench/webhooks.py [rounds]
"""

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
from bench.common import drop_queued_tasks, use_bench_queue  # noqa: E402

use_bench_queue()
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchyard_bench")
SCAN_EVERY_S = 2.0  # the beat entry's cadence
GOAL_S = SCAN_EVERY_S + 1.0
SECRET = uuid.uuid4().hex  # the webhooks' signing key for this run


def start_worker(database: str, queue: str, log: Path) -> subprocess.Popen:
    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + database
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SWITCHYARD_CELERY_QUEUE": queue,  # its deliveries queue on its own fleet lane
        "PYTHONUNBUFFERED": "1",
    }
    args = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "-Q", queue]
    args += ["--concurrency=2", "--without-gossip", "--without-mingle", "-n", f"{queue}@bench"]
    with open(log, "wb") as out:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_worker(queue: str, proc: subprocess.Popen, log: Path) -> None:
    from controlplane.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"worker exited:\n{log.read_text(errors='replace')[-3000:]}")
        if app.control.ping(destination=[f"{queue}@bench"], timeout=0.5):
            return
    sys.exit("the worker did not answer within 60 s")


def purge(queue: str) -> None:
    """Drop what is left on the worker's queue (a scan queued as the worker stopped)."""
    from controlplane.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)


def beat(queue: str, stop: threading.Event) -> None:
    """What celery beat does for the `notifications-outbox-scan` entry."""
    from notifications.tasks import scan_outbox

    while not stop.wait(SCAN_EVERY_S):
        scan_outbox.apply_async(queue=queue)


def fire(alert_id: int) -> float:
    from audit.services import audit_record

    details = {
        "kind": "node_down",
        "severity": "critical",
        "summary": "bench",
        "alert_id": alert_id,
    }
    audit_record(actor=None, action="alert.fired", details=details)  # autocommit: committed
    return time.monotonic()


def delivery_latencies(receiver, rounds: int) -> list[float]:
    import random

    out = []
    for n in range(rounds):
        time.sleep(random.uniform(0.2, SCAN_EVERY_S))  # a random phase against the scans
        before = len(receiver.requests)
        t0 = fire(n)
        got = receiver.wait_for(before + 1, timeout_s=30)[before]
        arrived = time.monotonic()
        if not got.is_signed_with(SECRET) or got.document["data"]["alert_id"] != n:
            sys.exit(f"round {n}: unexpected delivery {got.headers} {got.body[:200]!r}")
        out.append(arrived - t0)
        print(f"  round {n + 1}: {arrived - t0:.3f} s")
    return out


def scan_cost(alerts: int) -> tuple[float, float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from notifications.outbox import outbox_scan

    for n in range(alerts):
        fire(10_000 + n)
    with CaptureQueriesContext(connection) as queries:
        cpu, wall = time.process_time(), time.perf_counter()
        outbox_scan()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu * 1000, wall * 1000, len(queries)


def seed(user_model, receiver_url: str) -> None:
    from audit.models import AuditEvent
    from notifications.services import webhook_create

    rita = user_model.objects.create(username="bench-rita", is_superuser=True)
    AuditEvent.objects.bulk_create(
        AuditEvent(action="deployment.succeeded", details={"n": n}) for n in range(20_000)
    )
    webhook_create(actor=rita, url=receiver_url, secret=SECRET, events=["alert.fired"])
    return rita


def part_two(rita) -> None:
    from notifications.models import Webhook
    from notifications.outbox import outbox_scan
    from notifications.services import webhook_create

    Webhook.objects.update(is_active=False)  # the worker is gone: nothing POSTs now
    for n in range(10):
        url = f"http://127.0.0.1:9/hook-{n}"
        webhook_create(actor=rita, url=url, secret=SECRET, events=["alert.fired"])
    outbox_scan()
    print("one outbox scan, 10 webhooks, 20,000 other audit rows:")
    idle, busy = [], []
    for n in range(5):
        idle.append(scan_cost(0))
        busy.append(scan_cost(100))
        print(
            f"  round {n + 1}: no new row {idle[-1][0]:.1f} ms CPU, {idle[-1][1]:.1f} ms wall, "
            f"{idle[-1][2]} queries; 100 new alerts {busy[-1][0]:.1f} ms CPU, "
            f"{busy[-1][1]:.1f} ms wall, {busy[-1][2]} queries"
        )
    cpu_idle = statistics.median(c for c, _, _ in idle)
    cpu_busy = statistics.median(c for c, _, _ in busy)
    print(
        f"median CPU: idle {cpu_idle:.1f} ms, 100 alerts x 10 webhooks {cpu_busy:.1f} ms "
        f"({cpu_busy / 1000:.2f} ms per delivery recorded); busy / idle {cpu_busy / cpu_idle:.1f}"
    )


def main(rounds: int) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from tests.notifications.receiver import Receiver

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    queue = f"webhook-bench-{uuid.uuid4().hex[:8]}"
    try:
        with tempfile.TemporaryDirectory(prefix="webhook-bench-") as tmp, Receiver() as receiver:
            rita = seed(get_user_model(), receiver.url)
            log = Path(tmp) / "worker.log"
            worker = start_worker(test_db, queue, log)
            stop = threading.Event()
            try:
                wait_worker(queue, worker, log)
                ticker = threading.Thread(target=beat, args=(queue, stop), daemon=True)
                ticker.start()
                print(
                    f"alert row committed -> signed POST received (scan every {SCAN_EVERY_S:g} s):"
                )
                got = sorted(delivery_latencies(receiver, rounds))
            finally:
                stop.set()
                worker.terminate()
                worker.wait(30)
            p95 = got[min(len(got) - 1, round(0.95 * (len(got) - 1)))]
            verdict = "met" if p95 <= GOAL_S else "MISSED"
            print(
                f"n {len(got)}, median {statistics.median(got):.3f} s, p95 {p95:.3f} s, "
                f"max {got[-1]:.3f} s; goal p95 <= {GOAL_S:g} s: {verdict}"
            )
            part_two(rita)
    finally:
        drop_queued_tasks()
        purge(queue)
        connection.close()
        connection.creation.destroy_test_db(test_db, verbosity=0)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
