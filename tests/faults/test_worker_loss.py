"""A worker SIGKILLed mid-push or mid-benchmark: the row's lease runs out, the sweep finishes
it honestly (failed, saying why), the model is free again and a benchmark's temporary model
leaves the node. While the worker lives, its heartbeat keeps the sweep away, however long
the work takes."""

import time

import pytest

from benchmarks.models import BenchmarkRun
from benchmarks.services import benchmark_create, temp_name_prefix
from benchmarks.sweep import benchmarks_lost_sweep
from deployments.models import Deployment, DeploymentNode
from deployments.services import deployment_create
from deployments.sweep import deployments_lost_sweep
from integrations.triton.client import TritonClient
from tests.conftest import start_celery_worker, wait_for
from tests.faults.conftest import new_model, register, slow_entries
from tests.nodes import keyed_client
from tests.registry.archives import register_risk_score_as

pytestmark = [pytest.mark.triton]

LEASE = {"SWITCHYARD_WORK_LEASE_S": "3"}


def _client(node) -> TritonClient:
    return keyed_client(node)


def _loaded(node) -> dict[str, set[str]]:
    with _client(node) as client:
        return client.loaded_models()


def test_a_push_whose_worker_is_killed_is_failed_by_the_sweep_and_frees_the_model(
    fault_world, fault_queue
):
    world = fault_world
    model = new_model(world, "slow_push")
    version = register(model, world["ada"], slow_entries("slow_push"))
    worker = start_celery_worker(world["tmp"] / "worker.log", fault_queue, env=LEASE)
    try:
        deployment = deployment_create(
            cluster=world["cluster"], version=version, actor=world["rita"]
        )
        rows = DeploymentNode.objects.filter(deployment=deployment)
        wait_for(
            lambda: rows.filter(status=DeploymentNode.Status.LOADING).exists(),
            timeout_s=30,
            what="the push to start loading",
            proc=worker.proc,
            log=worker.log,
        )
        time.sleep(4)  # longer than a lease: the live worker's heartbeat keeps the row
        assert deployments_lost_sweep() == []
        deployment.refresh_from_db()
        assert deployment.status == Deployment.Status.RUNNING and deployment.heartbeat_at
        worker.proc.kill()  # SIGKILL: no cleanup, no acknowledgement
        worker.proc.wait(timeout=10)
    finally:
        worker.stop()
    wait_for(lambda: deployments_lost_sweep() == [deployment.pk], timeout_s=10, what="sweep")
    deployment.refresh_from_db()
    assert deployment.status == Deployment.Status.FAILED and deployment.finished_at
    assert "worker running it stopped" in deployment.error and "lease" in deployment.error
    assert not rows.filter(status=DeploymentNode.Status.LOADING).exists()
    assert deployments_lost_sweep() == []  # finished once
    # The model is free: its next deployment is accepted (not 409 "still running").
    again = deployment_create(cluster=world["cluster"], version=version, actor=world["rita"])
    Deployment.objects.filter(pk=again.pk).update(status=Deployment.Status.FAILED)
    with _client(world["node"]) as client:  # the slow load the killed push left behind
        client.wait_ready("slow_push", ["1"], timeout_s=60)
        client.unload("slow_push")


def test_a_benchmark_whose_worker_is_killed_is_failed_and_its_model_unloaded(
    fault_world, fault_queue
):
    world = fault_world
    model = new_model(world, "bench_kill")
    version = register_risk_score_as(model, world["ada"], 1)
    worker = start_celery_worker(world["tmp"] / "worker.log", fault_queue, env=LEASE)
    try:
        run = benchmark_create(
            version=version,
            cluster=world["cluster"],
            concurrency=[1, 2],
            duration_s=30,
            actor=world["ada"],
        )
        prefix = temp_name_prefix(run)
        wait_for(
            lambda: (
                BenchmarkRun.objects.get(pk=run.pk).progress_pct > 0
                or BenchmarkRun.objects.get(pk=run.pk).results
            ),
            timeout_s=60,
            what="the benchmark to measure",
            proc=worker.proc,
            log=worker.log,
        )
        assert [n for n in _loaded(world["node"]) if n.startswith(prefix)]
        time.sleep(4)  # longer than a lease: the live worker's heartbeat keeps the row
        assert benchmarks_lost_sweep() == []
        worker.proc.kill()
        worker.proc.wait(timeout=10)
    finally:
        worker.stop()
    assert [n for n in _loaded(world["node"]) if n.startswith(prefix)]  # left behind
    wait_for(lambda: benchmarks_lost_sweep() == [run.pk], timeout_s=10, what="sweep")
    run.refresh_from_db()
    assert run.status == BenchmarkRun.Status.FAILED and run.finished_at
    assert "worker running it stopped" in run.error
    assert run.verdict["passed"] is False and run.verdict["reasons"] == [run.error]
    assert not [n for n in _loaded(world["node"]) if n.startswith(prefix)]
