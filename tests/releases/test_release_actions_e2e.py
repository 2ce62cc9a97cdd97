"""A release manager's buttons end to end: pause, resume, approve at a manual gate, promote
now and manual rollback, through the API, against real Triton nodes, a real nginx under
client traffic, and ticks from a real Celery worker queued every second as beat does. A
double click sends an action twice at once: one wins, the other gets 409."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from rest_framework.test import APIClient

from releases.models import Release
from releases.services import release_create
from tests.conftest import start_celery_worker, wait_for
from tests.faults.conftest import fault_queue  # noqa: F401 - fixture
from tests.faults.test_canary_under_busy_lane import Beat
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_with_baseline,
    _unload,
    assert_retries_within,
    release_world,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

SLA = {"p99_latency_ms": 500, "min_success_rate": 99.0}


def _act(user, release_id: int, action: str) -> int:
    client = APIClient()
    client.force_authenticate(user)
    url = f"/api/v1/releases/{release_id}/actions/"
    return client.post(url, {"action": action}, format="json").status_code


def _double_click(user, release_id: int, action: str) -> list[int]:
    def click(_) -> int:
        try:
            return _act(user, release_id, action)
        finally:
            connection.close()  # this thread's own

    with ThreadPoolExecutor(2) as pool:
        return sorted(pool.map(click, range(2)))


def _until(release_id: int, done, what: str, timeout_s: float = 60.0) -> Release:
    return wait_for(
        lambda: (r := Release.objects.get(pk=release_id)) and done(r) and r,
        timeout_s=timeout_s,
        what=what,
    )


@pytest.fixture
def ticked(release_world, fault_queue, tmp_path):  # noqa: F811
    """release_world with a real worker on every lane and ticks queued every second."""
    worker = start_celery_worker(tmp_path / "worker.log", fault_queue)
    beat = Beat()
    beat.start()
    try:
        yield release_world
    finally:
        beat.stop.set()
        beat.join(5)
        worker.stop()


def test_pause_resume_approve_and_promote_through_a_real_worker(ticked):
    world, rita = ticked, ticked["rita"]
    model, _, candidate = _model_with_baseline(world, "act_good", 2, SLA)
    with Traffic(world["port"], "act_good") as traffic:
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=rita,
            steps=[20, 50, 100],
            manual_gates=[50],
            step_interval_s=2,
            analysis={"min_requests": 10, "latency_tolerance": 5},
            drain_s=0.5,
            progress_deadline_s=120,
        )
        pk = release.pk
        _until(pk, lambda r: r.phase == "PROGRESSING" and r.router_weight == 20.0, "20%")
        assert _double_click(rita, pk, "pause") == [200, 409]  # one wins
        paused = _until(pk, lambda r: r.phase == "PAUSED", "paused")
        assert "paused by rita" in paused.reason and paused.router_weight == 20.0
        time.sleep(3)  # longer than a step: a paused release holds its weight
        assert Release.objects.get(pk=pk).phase == "PAUSED"
        assert _act(rita, pk, "approve") == 409  # not a gate
        assert _act(rita, pk, "resume") == 200
        gate = _until(pk, lambda r: r.phase == "WAITING_APPROVAL", "the gate at 50%")
        assert gate.router_weight == 20.0  # the gated step is not entered before approval
        assert _double_click(rita, pk, "approve") == [200, 409]
        _until(pk, lambda r: r.phase == "PROGRESSING" and r.router_weight == 50.0, "50%")
        assert _act(rita, pk, "promote") == 200
        done = _until(pk, lambda r: not r.is_active, "the promotion")
    assert done.phase == "SUCCEEDED", done.reason
    phases = list(done.events.filter(kind="phase").values_list("message", flat=True))
    assert any("promoted by rita" in m for m in phases), phases
    assert traffic.failed == 0, traffic.summary()
    assert_retries_within(traffic, done)
    assert _loaded(world, "act_good") == [{"2"}, {"2"}]
    assert model.aliases.get(name="production").version_id == candidate.pk
    assert _act(rita, pk, "rollback") == 409  # finished: nothing to roll back
    _unload(world, model)


def test_a_manual_rollback_mid_step_through_a_real_worker(ticked):
    world, rita = ticked, ticked["rita"]
    model, _, candidate = _model_with_baseline(world, "act_back", 2, SLA)
    with Traffic(world["port"], "act_back") as traffic:
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=rita,
            steps=[20, 100],
            step_interval_s=30,
            analysis={"min_requests": 10},
            drain_s=0.5,
            progress_deadline_s=120,
        )
        pk = release.pk
        _until(pk, lambda r: r.phase == "PROGRESSING" and r.router_weight == 20.0, "20%")
        assert _double_click(rita, pk, "rollback") == [200, 409]
        done = _until(pk, lambda r: not r.is_active, "the rollback")
    assert done.phase == "ROLLED_BACK", done.reason
    phases = list(done.events.filter(kind="phase").values_list("message", flat=True))
    assert any("rollback by rita" in m for m in phases), phases
    assert traffic.failed == 0, traffic.summary()
    assert_retries_within(traffic, done)
    assert _loaded(world, "act_back") == [{"1"}, {"1"}]
    _unload(world, model)
