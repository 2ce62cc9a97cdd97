"""Releases that must end without a human: a slow candidate (latency gate) and a worker
killed in the middle of a release (the next worker resumes from the stored state)."""

import threading
import time

import pytest

from releases.models import Release
from releases.services import release_create
from releases.tasks import tick
from tests.conftest import start_celery_worker, wait_for
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_with_baseline,
    _tick_until,
    _unload,
    assert_retries_within,
    release_world,  # noqa: F401 - fixture
    ticking,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton]


@pytest.mark.django_db(transaction=True)
def test_slow_candidate_is_rolled_back_by_the_latency_gate(release_world, ticking):  # noqa: F811
    world = release_world
    model, _, candidate = _model_with_baseline(
        world, "rel_slow", 4, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    with Traffic(world["port"], "rel_slow") as traffic:
        traffic.more(20)  # traffic flows
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[50, 100],
            step_interval_s=2,
            analysis={"min_requests": 10, "max_failed_checks": 1, "latency_tolerance": 1.3},
            drain_s=0.5,
            progress_deadline_s=60,
        )
        release = _tick_until(ticking, release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
    assert release.phase == "ROLLED_BACK", release.reason
    failed_gate = release.events.filter(kind="analysis", data__result="fail").first()
    assert failed_gate is not None
    texts = [c["text"] for c in failed_gate.data["checks"] if not c["passed"]]
    assert any("p99" in t or "avg" in t for t in texts), texts
    assert traffic.failed == 0, traffic.summary()  # slow is not broken: nobody saw an error
    assert_retries_within(traffic, release)
    assert _loaded(world, "rel_slow") == [{"1"}, {"1"}]
    _unload(world, model)


class Beat(threading.Thread):
    """Sends a tick task every half second to a queue, as celery beat does."""

    def __init__(self, release_id: int, queue: str):
        super().__init__(daemon=True)
        self.release_id, self.queue, self.stop = release_id, queue, threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self.stop.is_set():
            tick.apply_async(args=[self.release_id], queue=self.queue)
            self.sent += 1
            self.stop.wait(0.5)


def _wait_phase(release_id: int, ok, timeout_s: float = 60.0) -> Release:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        release = Release.objects.get(pk=release_id)
        if ok(release):
            return release
        time.sleep(0.2)
    raise AssertionError(f"release {release_id} is {release.phase} ({release.reason})")


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_release_is_resumed_by_the_next_one(release_world, tmp_path):  # noqa: F811
    world = release_world
    model, _, candidate = _model_with_baseline(
        world, "rel_crash", 2, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    first = start_celery_worker(tmp_path / "worker1.log")
    beat = None
    try:
        with Traffic(world["port"], "rel_crash") as traffic:
            release = release_create(
                cluster=world["cluster"],
                candidate=candidate,
                actor=world["rita"],
                steps=[20, 50, 100],
                step_interval_s=2,
                drain_s=0.5,
                progress_deadline_s=90,
                analysis={"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5},
            )
            beat = Beat(release.pk, first.queue)
            beat.start()
            _wait_phase(release.pk, lambda r: r.phase == "PROGRESSING" and r.step_index >= 1)
            first.proc.kill()  # SIGKILL: no clean shutdown, maybe mid-tick
            first.proc.wait(10)
            stuck = Release.objects.get(pk=release.pk)
            sent = beat.sent
            wait_for(lambda: beat.sent >= sent + 3, timeout_s=30, what="ticks queued")
            # Ticks were queued since the kill, and nobody ran them.
            assert Release.objects.get(pk=release.pk).revision == stuck.revision
            second = start_celery_worker(tmp_path / "worker2.log", queue=first.queue)
            try:
                done = _wait_phase(release.pk, lambda r: not r.is_active, timeout_s=90)
            finally:
                beat.stop.set()
                beat.join(5)
                second.stop()
    finally:
        first.stop()
    assert done.phase == "SUCCEEDED", done.reason
    assert traffic.failed == 0, traffic.summary()
    # The killed worker may have applied a split it never recorded: one reload more.
    assert_retries_within(traffic, done, reloads=1)
    assert _loaded(world, "rel_crash") == [{"2"}, {"2"}]
    _unload(world, model)
