"""A real Celery worker process runs a task against the (test) PostgreSQL database."""

import pytest

from audit.models import AuditEvent
from audit.tasks import record_system_event

pytestmark = pytest.mark.django_db(transaction=True)


def test_task_runs_in_a_real_worker_and_writes_to_postgresql(celery_worker):
    result = record_system_event.apply_async(
        args=["system.selftest", {"probe": "celery"}], queue=celery_worker.queue
    )
    event_id = result.get(timeout=30)
    event = AuditEvent.objects.get(pk=event_id)
    assert event.action == "system.selftest"
    assert event.actor is None and event.actor_username == ""
    assert event.details["probe"] == "celery"
    assert event.details["worker_host"]  # written by the worker process, not by this one
    assert "succeeded" in celery_worker.log.read_text()
