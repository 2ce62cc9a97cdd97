"""Benchmark API, imports, the release gate and the version page (no load driven here)."""

import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from benchmarks.models import BenchmarkRun
from benchmarks.services import BenchmarkGateError, benchmark_gate_check
from tests.benchmarks.conftest import register_variant

pytestmark = [pytest.mark.django_db]
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "benchmarks"


def _api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _import(api, name, number, file_name, fmt="perf_analyzer", data=None):
    data = data if data is not None else (FIXTURES / file_name).read_bytes()
    upload = SimpleUploadedFile(file_name, data, content_type="text/csv")
    return api.post(
        f"/api/v1/models/{name}/versions/{number}/benchmarks/import/",
        {"file": upload, "format": fmt},
        format="multipart",
    )


def test_perf_analyzer_import_shows_on_the_version_page(bench_world, new_model, client):
    model = new_model("bench_import", p99_latency_ms=20.0, min_throughput_rps=1000.0)
    version = register_variant(model, bench_world["ada"], 2)
    answer = _import(
        _api(bench_world["ada"]), model.name, version.version, "perf_analyzer_risk_score.csv"
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["source"] == "perf_analyzer" and body["concurrency"] == [1, 4, 16]
    top = body["levels"][-1]
    assert top["throughput_rps"] == 1504.9 and top["p99_ms"] == 15.932  # µs -> ms
    assert top["server_queue_ms"] == 7.391 and top["server_compute_ms"] == 1.063
    assert body["verdict"]["passed"] is True, body["verdict"]

    client.force_login(bench_world["rita"])
    page = client.get(f"/models/{model.name}/versions/{version.version}/").content.decode()
    assert 'data-testid="benchmark-results"' in page and "1504.9" in page
    assert "perf_analyzer_risk_score.csv" in page and "p99 15.9 ms ≤ SLA 20.0 ms" in page
    assert "vendor/plotly/plotly-basic.min.js" in page and 'id="benchmark-chart-data"' in page
    listed = _api(bench_world["rita"]).get(
        f"/api/v1/models/{model.name}/versions/{version.version}/benchmarks/"
    )
    assert [row["id"] for row in listed.json()] == [body["id"]]


def test_model_analyzer_import_takes_the_default_config(bench_world, new_model):
    model = new_model("bench_ma")
    version = register_variant(model, bench_world["ada"], 2)
    answer = _import(
        _api(bench_world["ada"]),
        model.name,
        version.version,
        "model_analyzer_risk_score.csv",
        fmt="model_analyzer",
    )
    assert answer.status_code == 201, answer.content
    levels = answer.json()["levels"]
    assert [(lv["concurrency"], lv["p99_ms"]) for lv in levels] == [(1, 3.4), (4, 5.2), (16, 16.1)]


def test_a_bad_csv_is_refused_naming_the_line(bench_world, new_model):
    model = new_model("bench_bad")
    version = register_variant(model, bench_world["ada"], 2)
    text = (FIXTURES / "perf_analyzer_risk_score.csv").read_text().replace("1198.3", "fast")
    answer = _import(
        _api(bench_world["ada"]), model.name, version.version, "pa.csv", data=text.encode()
    )
    assert answer.status_code == 400
    error = answer.json()["errors"][0]
    assert error["file"] == "pa.csv" and error["line"] == 3
    assert "Inferences/Second" in error["message"]
    assert not BenchmarkRun.objects.filter(version=version).exists()


def test_benchmark_writes_need_the_algorithm_role(bench_world, new_model):
    model = new_model("bench_roles")
    version = register_variant(model, bench_world["ada"], 2)
    rita = _api(bench_world["rita"])
    body = {"model": model.name, "version": version.version, "cluster": "bench-staging"}
    assert rita.post("/api/v1/benchmarks/", body, format="json").status_code == 403
    imported = _import(rita, model.name, version.version, "perf_analyzer_risk_score.csv")
    assert imported.status_code == 403
    ada = _api(bench_world["ada"])
    created = ada.post("/api/v1/benchmarks/", {**body, "concurrency": [1], "duration_s": 1})
    assert created.status_code == 202, created.content
    run_id = created.json()["id"]
    assert rita.post(f"/api/v1/benchmarks/{run_id}/cancel/").status_code == 403
    assert ada.post(f"/api/v1/benchmarks/{run_id}/cancel/").status_code == 202
    assert ada.get(f"/api/v1/benchmarks/{run_id}/").json()["status"] == "cancelled"
    assert ada.post(f"/api/v1/benchmarks/{run_id}/cancel/").status_code == 409


def test_benchmarks_run_on_staging_clusters_only(bench_world, new_model):
    from deployments.services import cluster_create

    cluster_create(actor=bench_world["rita"], name="bench-prod", environment="production")
    model = new_model("bench_prod")
    version = register_variant(model, bench_world["ada"], 2)
    answer = _api(bench_world["ada"]).post(
        "/api/v1/benchmarks/",
        {"model": model.name, "version": version.version, "cluster": "bench-prod"},
        format="json",
    )
    assert answer.status_code == 400
    assert "staging clusters only" in answer.json()["errors"][0]["message"]


def test_gate_refuses_a_version_without_a_passing_benchmark(bench_world, new_model, settings):
    settings.SWITCHYARD_ACCEPT_IMPORTED_BENCHMARKS = True
    model = new_model("bench_gate", p99_latency_ms=5.0)
    version = register_variant(model, bench_world["ada"], 4)
    benchmark_gate_check(version=version, required=False)  # not required: nothing to check
    with pytest.raises(BenchmarkGateError) as refused:
        benchmark_gate_check(version=version, required=True)
    assert str(refused.value) == (
        f"v{version.version} has no passing benchmark: run one or import one before releasing"
    )
    # A failing benchmark (p99 15.9 ms > SLA 5 ms) does not open the gate; a passing one does.
    api = _api(bench_world["ada"])
    _import(api, model.name, version.version, "perf_analyzer_risk_score.csv")
    with pytest.raises(BenchmarkGateError):
        benchmark_gate_check(version=version, required=True)
    model.sla_p99_latency_ms = 50.0
    model.save(update_fields=["sla_p99_latency_ms"])
    _import(api, model.name, version.version, "perf_analyzer_risk_score.csv")
    benchmark_gate_check(version=version, required=True)


def test_imported_results_show_but_do_not_open_the_gate_by_default(bench_world, new_model):
    model = new_model("bench_gate_import", p99_latency_ms=50.0)
    version = register_variant(model, bench_world["ada"], 2)
    answer = _import(
        _api(bench_world["ada"]), model.name, version.version, "perf_analyzer_risk_score.csv"
    )
    assert answer.status_code == 201 and answer.json()["verdict"]["passed"] is True
    with pytest.raises(BenchmarkGateError) as refused:
        benchmark_gate_check(version=version, required=True)
    assert str(refused.value) == (
        f"v{version.version} has no passing benchmark (imported results do not count): "
        "run one on a staging cluster before releasing"
    )
    # A passing run by Switchyard itself opens it.
    BenchmarkRun.objects.filter(pk=answer.json()["id"]).update(source=BenchmarkRun.Source.RUN)
    benchmark_gate_check(version=version, required=True)


def test_a_setting_lets_imported_results_open_the_gate(bench_world, new_model, settings):
    settings.SWITCHYARD_ACCEPT_IMPORTED_BENCHMARKS = True
    model = new_model("bench_gate_accept", p99_latency_ms=50.0)
    version = register_variant(model, bench_world["ada"], 2)
    _import(_api(bench_world["ada"]), model.name, version.version, "perf_analyzer_risk_score.csv")
    benchmark_gate_check(version=version, required=True)


@pytest.mark.django_db(transaction=True)
def test_benchmark_api_runs_in_a_real_worker(bench_world, new_model, celery_worker):
    model = new_model("bench_worker")
    version = register_variant(model, bench_world["ada"], 2)
    api = _api(bench_world["ada"])
    from controlplane.celery import app

    default_queue, app.conf.task_default_queue = app.conf.task_default_queue, celery_worker.queue
    try:
        answer = api.post(
            "/api/v1/benchmarks/",
            {
                "model": model.name,
                "version": version.version,
                "cluster": "bench-staging",
                "concurrency": [2],
                "duration_s": 1,
            },
            format="json",
        )
    finally:
        app.conf.task_default_queue = default_queue
    assert answer.status_code == 202, answer.content
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = api.get(f"/api/v1/benchmarks/{answer.json()['id']}/").json()
        if body["status"] not in ("pending", "running"):
            break
        time.sleep(0.3)
    assert body["status"] == "succeeded", body
    level = body["levels"][0]
    assert level["requests"] > 0 and level["requests"] == level["server_requests"]


def test_console_benchmark_forms_are_for_the_algorithm_role(bench_world, new_model, client):
    model = new_model("bench_console")
    version = register_variant(model, bench_world["ada"], 2)
    start = f"/models/{model.name}/versions/{version.version}/benchmarks/start/"
    form = {"cluster": "bench-staging", "concurrency": "1, 4", "duration_s": "2"}
    client.force_login(bench_world["rita"])
    page = client.get(f"/models/{model.name}/versions/{version.version}/").content.decode()
    assert 'data-testid="benchmark-start-form"' not in page and "No benchmark yet" in page
    assert client.post(start, form).status_code == 403
    client.force_login(bench_world["ada"])
    assert client.post(start, form).status_code == 302
    run = BenchmarkRun.objects.get(version=version)
    assert run.concurrency == [1, 4] and run.duration_s == 2.0 and run.status == "pending"
    page = client.get(f"/models/{model.name}/versions/{version.version}/").content.decode()
    # The pending run shows its progress fragment, which polls itself every second.
    assert f'hx-get="/benchmarks/{run.pk}/progress/"' in page and 'hx-trigger="every 1s"' in page
    fragment = client.get(f"/benchmarks/{run.pk}/progress/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "HX-Refresh" not in fragment
    client.post(f"/benchmarks/{run.pk}/cancel/")
    finished = client.get(f"/benchmarks/{run.pk}/progress/", HTTP_HX_REQUEST="true")
    assert finished["HX-Refresh"] == "true"  # a finished run reloads the page to show results
