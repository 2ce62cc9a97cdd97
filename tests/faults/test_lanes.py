"""Work by urgency: a benchmark holding every long-work slot never delays a release tick or a
push, because each lane is a queue of its own with its own worker (controlplane/queues.py)."""

import time

import pytest

from benchmarks.models import BenchmarkRun
from benchmarks.services import benchmark_cancel, benchmark_create
from controlplane.queues import LANES, LONG, RELEASES, TASK_LANES, lane_of, lane_queue, route
from deployments.tasks import run_deployment
from releases.tasks import tick
from tests.conftest import start_celery_worker, wait_for
from tests.faults.conftest import new_model
from tests.registry.archives import register_risk_score_as


def test_every_task_has_a_lane_and_explicit_queues_win():
    from controlplane.celery import app

    app.loader.import_default_modules()
    names = {name for name in app.tasks if not name.startswith("celery.")}
    assert set(TASK_LANES) <= names  # no lane names a task that does not exist
    assert lane_of("releases.tick") == RELEASES and lane_of("benchmarks.run") == LONG
    assert lane_of("deployments.run_deployment") == "fleet"
    assert lane_queue("sy", "fleet") == "sy" and lane_queue("sy", LONG) == "sy.long"
    with pytest.raises(ValueError, match="unknown lane"):
        lane_queue("sy", "urgent")
    assert LANES == ("releases", "fleet", "long")
    routed = app.amqp.router.route({}, "releases.tick", (1,), {})
    assert routed["queue"].name == f"{app.conf.task_default_queue}.releases"
    explicit = app.amqp.router.route({"queue": "elsewhere"}, "releases.tick", (1,), {})
    assert explicit["queue"].name == "elsewhere"
    assert route("benchmarks.run", (), {}, {})["queue"].endswith(".long")


@pytest.mark.triton
def test_a_busy_long_lane_never_delays_ticks_or_pushes(fault_world, fault_queue):
    world = fault_world
    long_worker = start_celery_worker(
        world["tmp"] / "long.log", fault_queue, lanes=[lane_queue(fault_queue, LONG)]
    )
    urgent = start_celery_worker(
        world["tmp"] / "urgent.log",
        fault_queue,
        lanes=[lane_queue(fault_queue, RELEASES), lane_queue(fault_queue, "fleet")],
    )
    model = new_model(world, "lane_bench")
    version = register_risk_score_as(model, world["ada"], 1)
    try:
        run = benchmark_create(
            version=version,
            cluster=world["cluster"],
            concurrency=[1],
            duration_s=30,
            actor=world["ada"],
        )
        wait_for(
            lambda: BenchmarkRun.objects.get(pk=run.pk).status == BenchmarkRun.Status.RUNNING,
            timeout_s=30,
            what="the benchmark to hold the long lane",
            proc=long_worker.proc,
            log=long_worker.log,
        )
        queued = time.monotonic()
        ticked = tick.delay(2_000_000_000)  # a release that does not exist: a no-op tick
        pushed = run_deployment.delay(2_000_000_000)
        for task in (ticked, pushed):
            wait_for(
                lambda task=task: f"[{task.id}] succeeded" in urgent.log.read_text(),
                timeout_s=10,
                what=f"{task.id} on its own lane",
                proc=urgent.proc,
                log=urgent.log,
            )
        waited = time.monotonic() - queued
        assert BenchmarkRun.objects.get(pk=run.pk).status == BenchmarkRun.Status.RUNNING, waited
        assert f"[{ticked.id}]" not in long_worker.log.read_text()
        benchmark_cancel(run=run, actor=world["ada"])
        wait_for(
            lambda: BenchmarkRun.objects.get(pk=run.pk).is_finished,
            timeout_s=30,
            what="the cancelled benchmark to end",
        )
    finally:
        long_worker.stop()
        urgent.stop()
