"""The demo's benchmark: one small load test of one sample version on the smoke cluster's
node, started once, so the Reports page shows what the demo's versions cost to validate
(their smoke tests) and to benchmark, apart from what they cost to serve."""

from benchmarks.models import BenchmarkRun
from benchmarks.services import BenchmarkError, benchmark_create
from deployments.models import TritonCluster
from models_registry.models import ModelVersion

# risk_score v2, the two-layer network: the version the demo's releases start from.
SAMPLE = ("risk_score", 2)
CONCURRENCY = [1, 4]
DURATION_S = 30.0  # about 45 s of compute: some 0.04 at the smoke node's price


def demo_benchmark_seed(*, cluster_name: str, actor) -> list[str]:
    """Queue the sample version's benchmark on `cluster_name` unless it has one; what was
    done, as lines for the terminal."""
    model, number = SAMPLE
    version = ModelVersion.objects.filter(model__name=model, version=number).first()
    cluster = TritonCluster.objects.filter(name=cluster_name).first()
    if version is None or cluster is None:
        return []
    if BenchmarkRun.objects.filter(version=version, source=BenchmarkRun.Source.RUN).exists():
        return []
    try:
        benchmark_create(
            version=version,
            cluster=cluster,
            concurrency=CONCURRENCY,
            duration_s=DURATION_S,
            actor=actor,
        )
    except BenchmarkError as exc:
        return [f"no demo benchmark: {exc.message}"]
    return [f"benchmarking {model} v{number} on {cluster.name} (its cost shows as benchmark)"]
