"""Benchmarks and smoke tests of a streaming (decoupled) model against a real Triton node:
each level's clients read `generate_stream` back to back, timed per event, and the verdict
holds the figures to the model's generative SLA (benchmarks/runner.py, benchmarks/verdict.py);
its smoke inference is one stream."""

import io

import pytest

from benchmarks.services import BenchmarkError, benchmark_create, benchmark_run
from deployments.smoke import model_version_smoke_validate
from models_registry.services import model_version_register
from tests.benchmarks.conftest import register_variant
from tests.benchmarks.test_runs import _loaded_bench_models
from tests.nodes import keyed_client
from tests.registry.archives import example_entries, tar_gz

pytestmark = [pytest.mark.triton, pytest.mark.django_db]

BODY = {"PROMPT": "my card was charged twice for one ticket", "MAX_TOKENS": 11}
SLA = {"p95_first_token_ms": 500.0, "p95_inter_token_ms": 60.0, "min_tokens_per_s": 20.0}


def _streaming(model, user, variant: int):
    entries = example_entries("token_stream", variant)
    config = entries[0][1].replace(b'name: "token_stream"', f'name: "{model.name}"'.encode())
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *entries[1:]]))
    return model_version_register(model=model, archive=archive, actor=user)


def _run(world, version, **extra):
    run = benchmark_create(
        version=version, cluster=world["staging"], concurrency=[1, 4], duration_s=2.0,
        actor=world["ada"], stream_body=BODY, **extra,
    )  # fmt: skip
    # A test transaction never commits, so nothing was queued: the task's body runs here.
    return benchmark_run(run_id=run.pk)


def test_a_streaming_sweep_times_first_tokens_and_tokens_against_the_sla(bench_world, new_model):
    model = new_model("bench_stream", **SLA)
    v1 = _streaming(model, bench_world["ada"], 1)
    run = _run(bench_world, v1)
    assert run.status == "succeeded", run.error
    for level in run.results:
        assert level["errors"] == 0 and level["streams"] == level["requests"] > 0, level
        assert level["server_requests"] == level["requests"], level  # one request a stream
        # The example: its first token after 40 ms, then one every 10 ms, 11 in all.
        assert 40 <= level["first_token_p50_ms"] <= level["first_token_p95_ms"] < 400, level
        assert 9 <= level["inter_token_p95_ms"] < 60 and level["tokens_per_stream"] == 11
        assert level["tokens_per_s_p5"] > 20 and level["tokens_per_s"] > 0
    texts = [c["text"] for c in run.verdict["checks"]]
    assert any(t.startswith("p95 first token") for t in texts), texts
    assert any(t.startswith("p5 tokens/s a stream") for t in texts), texts
    assert run.verdict["passed"] is True, run.verdict
    assert _loaded_bench_models(bench_world["node"]) == []


def test_a_slow_first_token_fails_a_generative_sla_its_baseline_meets(bench_world, new_model):
    model = new_model("bench_stream_slow", p95_first_token_ms=70.0)
    v2 = _streaming(model, bench_world["ada"], 2)  # its first token after 80 ms
    run = _run(bench_world, v2)
    assert run.status == "succeeded", run.error
    assert run.verdict["passed"] is False
    assert any("p95 first token" in r and "> SLA 70" in r for r in run.verdict["reasons"])


def test_a_stream_body_is_checked_against_the_model(bench_world, new_model):
    streaming = _streaming(new_model("bench_stream_body"), bench_world["ada"], 1)
    with pytest.raises(BenchmarkError, match="names inputs the model does not have: TEXT"):
        benchmark_create(
            version=streaming, cluster=bench_world["staging"], concurrency=[1],
            duration_s=1.0, actor=bench_world["ada"], stream_body={"TEXT": "hi"},
        )  # fmt: skip
    plain = register_variant(new_model("bench_plain_body"), bench_world["ada"], 2)
    with pytest.raises(BenchmarkError, match="stream_body is for a decoupled model"):
        benchmark_create(
            version=plain, cluster=bench_world["staging"], concurrency=[1],
            duration_s=1.0, actor=bench_world["ada"], stream_body=BODY,
        )  # fmt: skip


def test_a_streaming_versions_smoke_test_reads_one_stream(bench_world, new_model, client):
    """Its smoke inference is a generate stream from generated inputs, read to its end
    (deployments/smoke.py), on the staging node, under a temporary name."""
    version = _streaming(new_model("smoke_stream"), bench_world["ada"], 1)
    report = model_version_smoke_validate(version_id=version.pk)
    assert report["passed"] is True, report
    stream = report["stream"]
    assert set(stream["request"]) == {"PROMPT", "MAX_TOKENS"}, stream
    assert stream["events"] == stream["request"]["MAX_TOKENS"], stream  # one a token
    assert report["latency_ms"] > 0 and report["output_shapes"] == {}
    version.refresh_from_db()
    assert version.status == "smoke_passed"
    client.force_login(bench_world["ada"])
    page = client.get("/models/smoke_stream/versions/1/").content.decode()
    assert "one stream (it answers over streams only) with generated inputs" in page
    with keyed_client(bench_world["node"]) as client:
        assert not [m for m in client.loaded_models() if "--smoke-" in m]
