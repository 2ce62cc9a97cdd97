"""A candidate whose load takes half a minute never holds the releases lane: its tick starts
the load on the fleet lane and only observes it, so with one release slot a faulty canary of
another model, started meanwhile, is still rolled back by the fast guard before the slow
candidate is even READY. Real workers per lane, ticks queued every second as beat does, a
real nginx and real Triton nodes under client traffic."""

import pytest

from controlplane.queues import FLEET, RELEASES, lane_queue
from models_registry.services import model_create
from releases.models import Release, ServingLoad
from releases.services import release_action, release_create
from tests.conftest import start_celery_worker, wait_for
from tests.deploying import pushed
from tests.faults.conftest import register, slow_entries
from tests.faults.test_canary_under_busy_lane import Beat
from tests.registry.archives import register_risk_score_as
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_with_baseline,
    _unload,
    release_world,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

SLA = {"p99_latency_ms": 500, "min_success_rate": 99.0}
SLOW_S = 20


def _release(world, candidate, **kw):
    return release_create(
        cluster=world["cluster"],
        candidate=candidate,
        actor=world["rita"],
        steps=[25, 100],
        step_interval_s=2,
        analysis={"min_requests": 10, "max_failed_checks": 1},
        drain_s=0.5,
        progress_deadline_s=120,
        **kw,
    )


def test_a_slow_load_never_holds_the_releases_lane(release_world, fault_queue, tmp_path):  # noqa: F811
    world = release_world
    faulty_model, _, faulty = _model_with_baseline(world, "load_faulty", 3, SLA)
    slow_model = model_create(name="load_slow", team="fraud", actor=world["ada"], sla=SLA)
    register_risk_score_as(slow_model, world["ada"], 1)
    from deployments.services import deployment_create

    baseline = slow_model.versions.get(version=1)
    push = deployment_create(cluster=world["cluster"], version=baseline, actor=world["rita"])
    pushed(push)
    slow = register(slow_model, world["ada"], slow_entries("load_slow", SLOW_S, variant=2))

    releases_lane = [lane_queue(fault_queue, RELEASES)]
    ticks = start_celery_worker(tmp_path / "ticks.log", fault_queue, lanes=releases_lane)
    fleet = [  # two slots: the slow load holds one, the faulty candidate's load takes the other
        start_celery_worker(tmp_path / f"fleet{i}.log", fault_queue, lanes=[fault_queue])
        for i in (1, 2)
    ]
    assert lane_queue(fault_queue, FLEET) == fault_queue
    beat = Beat()
    slow_release = None
    try:
        beat.start()
        slow_release = _release(world, slow)
        loading = ServingLoad.objects.filter(release=slow_release)
        wait_for(
            lambda: loading.filter(status="running").exists(),
            timeout_s=30,
            what="the slow load to start on the fleet lane",
        )
        with Traffic(world["port"], "load_faulty") as traffic:
            faulty_release = _release(world, faulty)
            ended = wait_for(
                lambda: (r := Release.objects.get(pk=faulty_release.pk)).is_active is False and r,
                timeout_s=SLOW_S + 120,
                what="the faulty canary to end",
                proc=ticks.proc,
                log=ticks.log,
            )
            # Read at once: the slow load's state when the canary had ended.
            slow_load = loading.get()
        slow_now = Release.objects.get(pk=slow_release.pk)
        assert ended.phase == "ROLLED_BACK", ended.reason
        why = " ".join(ended.events.filter(kind="phase").values_list("message", flat=True))
        assert "fast guard" in why or "failed checks" in why, why
        # The slow candidate was still loading when the canary ended: its tick never waited
        # on it (the load is what ends the wait, not a clock).
        assert slow_load.status == "running", (slow_load.status, slow_load.error)
        assert slow_now.phase == "LOADING", (slow_now.phase, slow_now.reason)
        assert traffic.versions.get("1", 0) > 0
        progressing = wait_for(
            lambda: (r := Release.objects.get(pk=slow_release.pk)).phase != "LOADING" and r,
            timeout_s=SLOW_S + 30,
            what="the slow candidate to load and its release to go on",
        )
        assert progressing.phase in {"PROGRESSING", "PROMOTING", "DRAINING", "SUCCEEDED"}
        assert loading.get().status == "succeeded" and loading.get().seen_at is not None
        log = ticks.log.read_text()
        assert "releases.tick[" in log and "releases.serving_load[" not in log
        assert any("releases.serving_load[" in w.log.read_text() for w in fleet)
        assert _loaded(world, "load_faulty") == [{"1"}, {"1"}]
    finally:
        if slow_release is not None and Release.objects.get(pk=slow_release.pk).is_active:
            release_action(release=slow_release, action="rollback", actor=world["rita"])
            wait_for(
                lambda: not Release.objects.get(pk=slow_release.pk).is_active,
                timeout_s=60,
                what="the slow release to roll back",
            )
        beat.stop.set()
        beat.join(5)
        ticks.stop()
        for worker in fleet:
            worker.stop()
    _unload(world, faulty_model)
    _unload(world, slow_model)
