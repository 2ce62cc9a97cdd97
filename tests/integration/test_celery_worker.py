"""A real Celery worker process runs a task against the (test) PostgreSQL database."""

import pytest

from audit.models import AuditEvent
from audit.tasks import record_system_event

pytestmark = pytest.mark.django_db(transaction=True)


def test_task_runs_in_a_real_worker_and_writes_to_postgresql(celery_worker):
    result = record_system_event.apply_async(
        args=["system.selftest", {"probe": "celery"}],
        queue=celery_worker.queue,
        ignore_result=False,  # no task keeps its result unless the caller asks
    )
    event_id = result.get(timeout=30)
    result.forget()  # its result key goes now, not in CELERY_RESULT_EXPIRES
    event = AuditEvent.objects.get(pk=event_id)
    assert event.action == "system.selftest"
    assert event.actor is None and event.actor_username == ""
    assert event.details["probe"] == "celery"
    assert event.details["worker_host"]  # written by the worker process, not by this one
    assert "succeeded" in celery_worker.log.read_text()


def test_tasks_queued_for_rows_deleted_since_finish_quietly(celery_worker):
    # e.g. a tick queued by an action, then the database was reset (tests, benches, demo)
    from deployments.tasks import run_deployment, smoke_validate
    from releases.tasks import tick
    from tests.conftest import wait_for

    gone = 2_000_000_000
    ticked = tick.apply_async(args=[gone], queue=celery_worker.queue)  # ignores its result
    keep = {"queue": celery_worker.queue, "ignore_result": False}
    deploy = run_deployment.apply_async(args=[gone], **keep)
    smoke = smoke_validate.apply_async(args=[gone], **keep)
    assert (deploy.get(timeout=30), smoke.get(timeout=30)) == ("gone", None)
    deploy.forget(), smoke.forget()
    wait_for(
        lambda: f"Task releases.tick[{ticked.id}] succeeded" in celery_worker.log.read_text(),
        timeout_s=30,
        what="the tick of a deleted release to succeed",
    )
    log = celery_worker.log.read_text()
    assert log.count("is gone") == 3 and "DoesNotExist" not in log
