"""The Benchmarks section of the version page: start, live progress, cancel, import, charts."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.roles import Role, user_has_role
from benchmarks import selectors, services
from benchmarks.models import BenchmarkRun
from benchmarks.services import BenchmarkError
from deployments.selectors import cluster_get
from models_registry.models import ModelVersion
from models_registry.selectors import model_version_or_404, user_owns_model


def _can_benchmark(user, version: ModelVersion) -> bool:
    """The algorithm role and membership of the version's team (superusers: always)."""
    return user_has_role(user, Role.ALGORITHM.value) and user_owns_model(
        user=user, model=version.model
    )


def _chart_data(version: ModelVersion, latest: BenchmarkRun | None) -> dict:
    series = []
    if latest is not None:
        series.append({"label": f"v{version.version} (this version)", "levels": latest.results})
    baseline = selectors.production_baseline(version=version)
    if baseline is not None:
        series.append({"label": baseline["label"], "levels": baseline["levels"]})
    return {"series": series, "sla_p99_ms": version.model.sla_p99_latency_ms}


def benchmark_context(user, version: ModelVersion) -> dict:
    """What the version page's Benchmarks section shows."""
    runs = list(selectors.version_benchmarks(version=version)[:20])
    latest = selectors.latest_finished(version=version)
    return {
        "bench_runs": runs,
        "bench_active": next((r for r in runs if not r.is_finished), None),
        "bench_latest": latest,
        "bench_chart": _chart_data(version, latest),
        "bench_clusters": selectors.staging_clusters(),
        "bench_can_write": _can_benchmark(user, version),
    }


def _back(version: ModelVersion):
    url = reverse("console:model-version", args=[version.model.name, version.version])
    return redirect(f"{url}#benchmarks")


def _levels(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise BenchmarkError("Concurrency levels are whole numbers, e.g. 1, 4, 16.") from None


@login_required
@require_POST
def benchmark_start(request, name, version):
    found = model_version_or_404(model_name=name, version=version)
    if not _can_benchmark(request.user, found):
        raise PermissionDenied("Running benchmarks needs the algorithm role in the model's team.")
    cluster = cluster_get(name=request.POST.get("cluster", ""))
    try:
        if cluster is None:
            raise BenchmarkError("Choose a staging cluster.")
        services.benchmark_create(
            version=found,
            cluster=cluster,
            concurrency=_levels(request.POST.get("concurrency", "")),
            duration_s=float(request.POST.get("duration_s") or 10),
            actor=request.user,
        )
    except (BenchmarkError, ValueError) as exc:
        messages.error(request, getattr(exc, "message", str(exc)))
    return _back(found)


@login_required
def benchmark_progress(request, run_id):
    """The progress fragment htmx polls each second; a finished run reloads the page."""
    run = selectors.benchmark_get(run_id=run_id)
    if run is None:
        raise Http404(f"No benchmark {run_id}.")
    response = render(request, "console/benchmarks/_progress.html", {"run": run})
    if run.is_finished and request.headers.get("HX-Request"):
        response["HX-Refresh"] = "true"
    return response


@login_required
@require_POST
def benchmark_cancel(request, run_id):
    run = selectors.benchmark_get(run_id=run_id)
    if run is None:
        raise Http404(f"No benchmark {run_id}.")
    if not _can_benchmark(request.user, run.version):
        raise PermissionDenied("Cancelling needs the algorithm role in the model's team.")
    try:
        services.benchmark_cancel(run=run, actor=request.user)
    except BenchmarkError as exc:
        messages.error(request, exc.message)
    return _back(run.version)


@login_required
@require_POST
def benchmark_import(request, name, version):
    found = model_version_or_404(model_name=name, version=version)
    if not _can_benchmark(request.user, found):
        raise PermissionDenied("Importing benchmarks needs the algorithm role in the model's team.")
    upload = request.FILES.get("file")
    try:
        if upload is None:
            raise BenchmarkError("Choose a CSV file.")
        services.benchmark_import(
            version=found,
            fmt=request.POST.get("format", ""),
            data=upload.read(),
            file_name=upload.name,
            actor=request.user,
        )
    except BenchmarkError as exc:
        where = f" (line {exc.line})" if exc.line else ""
        messages.error(request, f"{upload.name if upload else 'Import'}{where}: {exc.message}")
    else:
        messages.success(request, f"Imported {upload.name}.")
    return _back(found)
