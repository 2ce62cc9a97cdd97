"""A faulty canary is rolled back by real workers while a benchmark holds every long-work
slot: release ticks run on their own lane, queued every second as beat does
(`releases.tick_active`, one `releases.tick` per release), through a real nginx and real
Triton nodes under client traffic."""

import threading

import pytest

from benchmarks.models import BenchmarkRun
from benchmarks.services import benchmark_cancel, benchmark_create
from controlplane.queues import FLEET, LONG, RELEASES, lane_queue
from deployments.services import cluster_create, node_create
from models_registry.services import model_create
from releases.models import Release
from releases.services import release_create
from releases.tasks import tick_active
from tests.conftest import start_celery_worker, wait_for
from tests.registry.archives import register_risk_score_as
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_with_baseline,
    _unload,
    release_world,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]


class Beat(threading.Thread):
    """Queues `releases.tick_active` every second, as celery beat's releases-tick entry does."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            tick_active.delay()
            self.stop.wait(1.0)


def _busy_benchmark(world):
    """A 60 s benchmark on a staging cluster of the first node; returns the run."""
    staging = cluster_create(
        actor=world["rita"], name="lane-staging", environment="staging", router={}
    )
    node = world["nodes"][0]
    urls = {"http_url": node.http_url, "grpc_url": node.grpc_url}
    node_create(cluster=staging, actor=world["rita"], name=node.name, **urls)
    busy = model_create(name="lane_busy", team="fraud", actor=world["ada"])
    version = register_risk_score_as(busy, world["ada"], 1)
    return benchmark_create(
        version=version, cluster=staging, concurrency=[1], duration_s=60, actor=world["ada"]
    )


def test_a_faulty_canary_rolls_back_while_a_benchmark_holds_the_long_lane(
    release_world,  # noqa: F811
    fault_queue,
    tmp_path,
):
    world = release_world
    model, _, candidate = _model_with_baseline(
        world, "lane_faulty", 3, {"p99_latency_ms": 500, "min_success_rate": 99.0}
    )
    long_worker = start_celery_worker(
        tmp_path / "long.log", fault_queue, lanes=[lane_queue(fault_queue, LONG)]
    )
    urgent = start_celery_worker(
        tmp_path / "urgent.log",
        fault_queue,
        lanes=[lane_queue(fault_queue, RELEASES), lane_queue(fault_queue, FLEET)],
    )
    beat = Beat()
    try:
        run = _busy_benchmark(world)
        row = BenchmarkRun.objects.filter(pk=run.pk)
        wait_for(lambda: row.get().status == "running", timeout_s=60, what="the benchmark")
        beat.start()
        with Traffic(world["port"], "lane_faulty") as traffic:
            traffic.more(20)  # traffic flows
            release = release_create(
                cluster=world["cluster"],
                candidate=candidate,
                actor=world["rita"],
                steps=[25, 50, 100],
                step_interval_s=2,
                analysis={"min_requests": 10, "max_failed_checks": 1},
                drain_s=0.5,
                progress_deadline_s=60,
            )
            ended = wait_for(
                lambda: (r := Release.objects.get(pk=release.pk)).is_active is False and r,
                timeout_s=90,
                what="the release to end",
                proc=urgent.proc,
                log=urgent.log,
            )
            benchmark_state = row.get().status
    finally:
        beat.stop.set()
        beat.join(5)
        if not row.get().is_finished:
            benchmark_cancel(run=row.get(), actor=world["ada"])
        wait_for(lambda: row.get().is_finished, timeout_s=60, what="the benchmark to end")
        long_worker.stop()
        urgent.stop()
    assert ended.phase == "ROLLED_BACK", ended.reason
    assert benchmark_state == "running"  # the long lane was busy the whole time
    assert "benchmarks.run[" not in urgent.log.read_text()
    assert "releases.tick[" in urgent.log.read_text()
    assert "releases.tick[" not in long_worker.log.read_text()
    assert traffic.versions.get("1", 0) > 0
    assert _loaded(world, "lane_faulty") == [{"1"}, {"1"}]
    _unload(world, model)
