"""Reads of benchmark runs: one run, a version's runs, production's baseline, the release gate."""

from django.db.models import QuerySet

from accounts.pagination import filtered
from benchmarks.models import BenchmarkRun
from core.rows import only_shown
from deployments.models import TritonCluster
from models_registry.models import Alias, ModelVersion

PRODUCTION_ALIAS = "production"


def benchmark_get(*, run_id: int) -> BenchmarkRun | None:
    return (
        BenchmarkRun.objects.select_related("version__model", "cluster", "node", "requested_by")
        .filter(pk=run_id)
        .first()
    )


def version_benchmarks(*, version: ModelVersion) -> QuerySet[BenchmarkRun]:
    """A version's runs and imports, newest first."""
    return BenchmarkRun.objects.filter(version=version).select_related(
        "cluster", "node", "requested_by"
    )


def latest_finished(*, version: ModelVersion) -> BenchmarkRun | None:
    """The newest succeeded run or import of a version, the one its page charts."""
    return version_benchmarks(version=version).filter(status=BenchmarkRun.Status.SUCCEEDED).first()


def version_has_passing_benchmark(version: ModelVersion, *, accept_imported: bool = False) -> bool:
    """True when a succeeded run (or, if accepted, import) of this version passed its verdict."""
    runs = BenchmarkRun.objects.filter(
        version=version, status=BenchmarkRun.Status.SUCCEEDED, verdict__passed=True
    )
    if not accept_imported:
        runs = runs.filter(source=BenchmarkRun.Source.RUN)
    return runs.exists()


def production_version(*, version: ModelVersion) -> ModelVersion | None:
    alias = (
        Alias.objects.filter(model_id=version.model_id, name=PRODUCTION_ALIAS)
        .select_related("version__model")
        .first()
    )
    return alias.version if alias else None


def production_baseline(*, version: ModelVersion) -> dict | None:
    """Production's newest passing benchmark as {"label","levels","run_id"}; None for itself."""
    production = production_version(version=version)
    if production is None or production.pk == version.pk:
        return None
    run = (
        BenchmarkRun.objects.filter(
            version=production, status=BenchmarkRun.Status.SUCCEEDED, verdict__passed=True
        )
        .order_by("-created_at", "-id")
        .first()
    )
    if run is None:
        return None
    return {"label": f"production v{production.version}", "levels": run.results, "run_id": run.pk}


def staging_clusters() -> QuerySet[TritonCluster]:
    """Clusters a benchmark may run on."""
    return TritonCluster.objects.filter(environment=TritonCluster.Environment.STAGING)


def benchmark_list(**filters) -> QuerySet[BenchmarkRun]:
    """Benchmark runs newest first, narrowed by `accounts.pagination.filtered`'s filters; of
    the objects each joins, only what a list shows."""
    qs = BenchmarkRun.objects.select_related("version__model", "cluster", "requested_by")
    listed = ("version__version", "version__model__name", "cluster__name", "requested_by__username")
    qs = only_shown(qs, *listed)
    return filtered(qs, model_field="version__model", **filters)
