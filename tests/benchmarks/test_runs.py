"""Benchmark runs against a real Triton node: numbers, server-side counts, verdicts, cancel."""

import pytest

from benchmarks.models import BenchmarkRun
from benchmarks.services import benchmark_cancel, benchmark_create, benchmark_run
from tests.benchmarks.conftest import register_variant
from tests.conftest import wait_for
from tests.nodes import keyed_client

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


def _loaded_bench_models(node) -> list[str]:
    with keyed_client(node) as client:
        return [name for name in client.loaded_models() if "--bench-" in name]


def _run(world, version, concurrency, duration_s=2.0) -> BenchmarkRun:
    run = benchmark_create(
        version=version,
        cluster=world["staging"],
        concurrency=concurrency,
        duration_s=duration_s,
        actor=world["ada"],
    )
    # A test transaction never commits, so nothing was queued: the task's body runs here.
    return benchmark_run(run_id=run.pk)


def test_sweep_stores_sane_numbers_and_counts_match_the_server(bench_world, new_model):
    model = new_model("bench_v2", p99_latency_ms=500.0)
    v2 = register_variant(model, bench_world["ada"], 2)
    run = _run(bench_world, v2, [1, 4])
    assert run.status == "succeeded", run.error
    assert [level["concurrency"] for level in run.results] == [1, 4]
    for level in run.results:
        assert level["throughput_rps"] > 0 and level["errors"] == 0
        assert 0 < level["p50_ms"] <= level["p90_ms"] <= level["p95_ms"] <= level["p99_ms"]
        # Every request the clients sent in the window, and nothing else, reached Triton.
        assert level["server_requests"] == level["requests"], level
        assert level["server_failures"] == 0
        assert level["server_compute_ms"] > 0 and level["server_queue_ms"] is not None
    assert run.verdict["passed"] is True, run.verdict
    assert run.progress_pct == 100.0
    assert _loaded_bench_models(bench_world["node"]) == []


def test_slow_variant_fails_the_verdict_against_an_sla_v2_meets(bench_world, new_model):
    from benchmarks.services import verdict_for
    from models_registry.services import alias_set

    model = new_model("bench_slow")
    v2 = register_variant(model, bench_world["ada"], 2)
    v4 = register_variant(model, bench_world["ada"], 4)
    fast = _run(bench_world, v2, [1, 4], duration_s=1.5)
    slow = _run(bench_world, v4, [1, 4], duration_s=1.5)
    assert fast.status == slow.status == "succeeded", (fast.error, slow.error)
    fast_p99, slow_p99 = fast.results[-1]["p99_ms"], slow.results[-1]["p99_ms"]
    assert slow_p99 > 1.5 * fast_p99  # v4 sleeps 5 ms per request on top of v2's work
    # An SLA between the two (a shared host makes absolute numbers noisy, not the order).
    model.sla_p99_latency_ms = round((fast_p99 * slow_p99) ** 0.5, 1)
    model.save(update_fields=["sla_p99_latency_ms"])
    v2.model.refresh_from_db()
    v4.model.refresh_from_db()
    fast.verdict = verdict_for(v2, fast.results)
    fast.save(update_fields=["verdict"])
    assert fast.verdict["passed"] is True, fast.verdict
    alias_set(model=model, name="production", version=v2, actor=bench_world["ada"])

    verdict = verdict_for(v4, slow.results)
    assert verdict["passed"] is False
    sla = model.sla_p99_latency_ms
    assert f"p99 {slow_p99:.1f} ms > SLA {sla:.1f} ms at concurrency 4" in verdict["reasons"]
    # Compared with production (the v2 example) at the same levels, with the change in percent.
    baseline = f"1.3 × production v{v2.version}'s"
    assert any(baseline in r for r in verdict["reasons"]), verdict
    deltas = {d["concurrency"]: d for d in verdict["deltas"]}
    assert set(deltas) == {1, 4} and deltas[4]["p99_pct"] > 30


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_a_running_benchmark_and_leaves_no_model_loaded(
    bench_world, new_model, celery_worker
):
    from controlplane.celery import app

    model = new_model("bench_cancel")
    v2 = register_variant(model, bench_world["ada"], 2)
    # Queued on commit to the long lane, as the API does; run by a real worker.
    default_queue, app.conf.task_default_queue = app.conf.task_default_queue, celery_worker.queue
    try:
        run = benchmark_create(
            version=v2,
            cluster=bench_world["staging"],
            concurrency=[1, 2, 4],
            duration_s=30.0,
            actor=bench_world["ada"],
        )
    finally:
        app.conf.task_default_queue = default_queue

    def sweeping():
        run.refresh_from_db()
        return run.status == "running" and run.progress_pct > 0

    wait_for(sweeping, timeout_s=60, what="the sweep to start", log=celery_worker.log)
    assert _loaded_bench_models(bench_world["node"]), "the sweep never loaded its model"
    benchmark_cancel(run=run, actor=bench_world["ada"])

    def finished():
        run.refresh_from_db()
        return run.status not in ("pending", "running")

    wait_for(finished, timeout_s=120, what="the cancelled run to stop", log=celery_worker.log)
    # Stopped inside the first 30 s level: no level finished, so none has results.
    assert run.status == "cancelled" and run.results == [], (run.status, run.results)
    assert _loaded_bench_models(bench_world["node"]) == []
