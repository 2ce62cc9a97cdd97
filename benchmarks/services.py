"""Writes for benchmarks: create, run, cancel, import; and the release gate.

Triton is called outside transactions only: a run is marked RUNNING in one short
transaction, the sweep runs, each level and the outcome are written in short ones after.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.errors import ApplicationError
from audit.services import audit_record
from benchmarks import importers, runner, selectors
from benchmarks.models import BenchmarkRun
from benchmarks.verdict import failed_run, judge
from deployments import leases, push, temporary
from deployments.models import TritonCluster, TritonNode
from deployments.validation import tensor_limits
from integrations.triton.errors import TritonError
from integrations.triton.inputs import generate_inputs
from integrations.triton.stream import is_decoupled
from models_registry.models import ModelVersion
from models_registry.services import RegistryError, team_write_check

logger = logging.getLogger(__name__)
Status = BenchmarkRun.Status


class BenchmarkError(ApplicationError):
    """A benchmark start, cancel or import refused (400 unless `status` says otherwise)."""


class BenchmarkGateError(Exception):
    """A release needs a passing benchmark of its candidate and there is none."""


def _check_load(concurrency: Sequence[int], duration_s: float) -> None:
    top = settings.BENCHMARK_MAX_CONCURRENCY
    if not concurrency or any(not 1 <= c <= top for c in concurrency):
        raise BenchmarkError(
            f"Concurrency levels must be 1..{top}, at least one.", field="concurrency"
        )
    if not 0 < duration_s <= settings.BENCHMARK_MAX_LEVEL_S:
        raise BenchmarkError(
            f"duration_s must be above 0 and at most {settings.BENCHMARK_MAX_LEVEL_S:g} s.",
            field="duration_s",
        )
    if len(concurrency) * duration_s > settings.BENCHMARK_MAX_TOTAL_S:
        raise BenchmarkError(
            f"levels x duration_s must stay within {settings.BENCHMARK_MAX_TOTAL_S:g} s.",
            field="duration_s",
        )


MAX_STREAM_BODY_BYTES = 64 * 1024


def _check_stream_body(version: ModelVersion, body: dict | None) -> None:
    """400 on `stream_body` unless it is a generate request of a decoupled model: an object
    of its input names to JSON values, at most 64 KiB."""
    if not body:
        return
    config = version.config_json or {}
    if not is_decoupled(config):
        raise BenchmarkError(
            "stream_body is for a decoupled model (it answers over streams); "
            f"{version} answers requests: leave it out.",
            field="stream_body",
        )
    names = {spec.get("name") for spec in config.get("input", [])}
    unknown = sorted(str(k) for k in body if k not in names)
    if unknown:
        raise BenchmarkError(
            f"stream_body names inputs the model does not have: {', '.join(unknown)} "
            f"(it has {', '.join(sorted(n for n in names if n))}).",
            field="stream_body",
        )
    if len(json.dumps(body)) > MAX_STREAM_BODY_BYTES:
        raise BenchmarkError("stream_body is larger than 64 KiB.", field="stream_body")


def _owner_check(actor, version: ModelVersion, what: str) -> None:
    """Benchmarks are a version's evidence: only its team's members (and superusers) add them."""
    try:
        team_write_check(actor=actor, team=version.model.team, what=what)
    except RegistryError as exc:
        raise BenchmarkError(exc.message, status=403) from None


def _node_of(cluster: TritonCluster) -> TritonNode:
    if cluster.environment != TritonCluster.Environment.STAGING:
        raise BenchmarkError(
            f"Cluster {cluster.name} is {cluster.environment}: benchmarks run on staging "
            "clusters only, never next to production traffic.",
            field="cluster",
        )
    node = cluster.nodes.exclude(health=TritonNode.Health.DOWN).order_by("name").first()
    if node is None:
        raise BenchmarkError(f"Cluster {cluster.name} has no node that is up.", field="cluster")
    return node


def benchmark_create(
    *,
    version: ModelVersion,
    cluster: TritonCluster,
    concurrency: Sequence[int],
    duration_s: float,
    actor,
    batch_size: int = 1,
    dims_override: dict | None = None,
    stream_body: dict | None = None,
) -> BenchmarkRun:
    """A pending benchmark of `version` on a staging node, queued after commit; audited.
    A decoupled model's levels are streams, each sending `stream_body` (its generate
    request) or one made from generated inputs."""
    _owner_check(actor, version, f"Benchmarking '{version.model.name}'")
    _check_load(concurrency, duration_s)
    _check_stream_body(version, stream_body)
    node = _node_of(cluster)
    try:  # the request shape must be valid before anything is queued
        generate_inputs(
            version.config_json,
            batch_size=batch_size,
            dims_override=dims_override,
            limits=tensor_limits(),
        )
    except ValueError as exc:
        raise BenchmarkError(str(exc), field="dims_override") from None
    run = BenchmarkRun(
        version=version,
        cluster=cluster,
        node=node,
        node_name=str(node),
        concurrency=list(concurrency),
        duration_s=duration_s,
        batch_size=batch_size,
        dims_override=dims_override or {},
        stream_body=stream_body or {},
        requested_by=actor,
    )
    with transaction.atomic():
        run.save()
        audit_record(
            actor=actor,
            action="benchmark.created",
            obj=run,
            details={"cluster": cluster.name, "concurrency": list(concurrency)},
        )
        transaction.on_commit(lambda: _enqueue(run.pk))
    return run


def _enqueue(run_id: int) -> None:
    from benchmarks.tasks import run_benchmark  # tasks import services: import at call time

    leases.enqueue_or_mark(
        run_benchmark.delay, BenchmarkRun.objects.all(), run_id, what="benchmark"
    )


def _start(run_id: int) -> BenchmarkRun | None:
    """Mark RUNNING under the row lock; None when there is nothing to do."""
    with transaction.atomic():
        run = (
            BenchmarkRun.objects.select_for_update(of=("self",))
            .select_related("version__model", "node__cluster")
            .get(pk=run_id)
        )
        if run.is_finished:
            return None
        if run.cancel_requested:
            _finish(run, Status.CANCELLED, error="Cancelled before it started.")
            return None
        run.status, run.started_at = Status.RUNNING, timezone.now()
        run.heartbeat_at = run.started_at
        run.results, run.level_index, run.progress_pct = [], 0, 0.0
        run.save(
            update_fields=[
                "status",
                "started_at",
                "heartbeat_at",
                "results",
                "level_index",
                "progress_pct",
            ]
        )
    return run


def _finish(run: BenchmarkRun, status: str, *, error: str = "") -> BenchmarkRun:
    run.refresh_from_db(fields=["results"])
    run.status, run.error, run.finished_at = status, error, timezone.now()
    if status == Status.SUCCEEDED:
        run.verdict, run.progress_pct = verdict_for(run.version, run.results), 100.0
    elif status == Status.FAILED:
        run.verdict = failed_run(error)  # the reason is in the verdict too, not only `error`
    run.save(update_fields=["status", "error", "finished_at", "verdict", "progress_pct"])
    return run


def verdict_for(version: ModelVersion, levels: list[dict]) -> dict:
    """The verdict of levels of `version` against its SLA and production's passing benchmark."""
    return judge(
        levels,
        sla=version.model.sla,
        baseline=selectors.production_baseline(version=version),
        tolerance=settings.BENCHMARK_BASELINE_TOLERANCE,
    )


def temp_name_prefix(run: BenchmarkRun) -> str:
    """What the temporary models of benchmark `run` are named with (deployments.temporary)."""
    return temporary.bench_prefix(run.version.model.name, run.pk)


def _spec(run: BenchmarkRun) -> runner.SweepSpec:
    version = run.version
    return runner.SweepSpec(
        plan=push.build_plan([version], upload=True),
        version=version.version,
        temp_name=temporary.bench_name(version.model.name, run.pk, version.version),
        concurrency=run.concurrency,
        duration_s=run.duration_s,
        batch_size=run.batch_size,
        dims_override=run.dims_override,
        request_timeout_s=settings.SWITCHYARD_TRITON_TIMEOUT_S * 6,
        stream_body=run.stream_body,
    )


def _on_tick(run_id: int):
    def tick(level_index: int, fraction: float) -> bool:
        rows = BenchmarkRun.objects.filter(pk=run_id)
        rows.update(level_index=level_index, progress_pct=round(fraction * 100, 1))
        return bool(rows.values_list("cancel_requested", flat=True).first())

    return tick


def _on_level(run_id: int):
    def record(level: dict) -> None:
        with transaction.atomic():
            run = BenchmarkRun.objects.select_for_update().get(pk=run_id)
            run.results = [*run.results, level]
            run.save(update_fields=["results"])

    return record


def benchmark_run(*, run_id: int) -> BenchmarkRun:
    """Run a pending benchmark to the end; finished ones are returned untouched. Never leaves
    the temporary model loaded, nor the row RUNNING."""
    run = _start(run_id)
    if run is None:
        return BenchmarkRun.objects.get(pk=run_id)
    rows = BenchmarkRun.objects.filter(pk=run.pk)
    try:
        with leases.lease_held(rows, what=f"benchmark {run.pk}"):
            runner.sweep(run.node, _spec(run), on_tick=_on_tick(run.pk), on_level=_on_level(run.pk))
    except runner.Cancelled:
        return _finish(run, Status.CANCELLED, error="Cancelled; finished levels are kept.")
    except (TritonError, push.CorruptArtifact, ValueError) as exc:
        return _finish(run, Status.FAILED, error=str(exc))
    except BaseException as exc:  # a time limit or a bug: record it, then let the task see it
        _finish(run, Status.FAILED, error=f"Internal error: {exc!r}")
        raise
    return _finish(run, Status.SUCCEEDED)


def benchmark_cancel(*, run: BenchmarkRun, actor) -> BenchmarkRun:
    """Ask a pending or running benchmark to stop (the runner checks between requests)."""
    _owner_check(actor, run.version, f"Cancelling a benchmark of '{run.version.model.name}'")
    with transaction.atomic():
        run = BenchmarkRun.objects.select_for_update().get(pk=run.pk)
        if run.is_finished:
            raise BenchmarkError(f"Benchmark {run.pk} already {run.status}.", status=409)
        run.cancel_requested = True
        fields = ["cancel_requested"]
        if run.status == Status.PENDING:
            run.status, run.finished_at = Status.CANCELLED, timezone.now()
            run.error = "Cancelled before it started."
            fields += ["status", "finished_at", "error"]
        run.save(update_fields=fields)
        audit_record(actor=actor, action="benchmark.cancelled", obj=run)
    return run


def benchmark_import(*, version: ModelVersion, fmt: str, data: bytes, file_name: str, actor):
    """Attach perf_analyzer or Model Analyzer results to a version, with a verdict; audited."""
    _owner_check(actor, version, f"Importing results of '{version.model.name}'")
    parser = importers.PARSERS.get(fmt)
    if parser is None:
        raise BenchmarkError(f"Unknown format {fmt!r}: use {', '.join(importers.PARSERS)}.")
    try:
        levels = parser(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BenchmarkError("The file is not UTF-8 text.", file=file_name) from None
    except importers.BenchmarkImportError as exc:
        raise BenchmarkError(exc.message, file=file_name, line=exc.line) from None
    now = timezone.now()
    run = BenchmarkRun(
        version=version,
        source=fmt,
        status=Status.SUCCEEDED,
        concurrency=[level["concurrency"] for level in levels],
        results=levels,
        verdict=verdict_for(version, levels),
        progress_pct=100.0,
        file_name=file_name[:300],
        requested_by=actor,
        started_at=now,
        finished_at=now,
    )
    with transaction.atomic():
        run.save()
        audit_record(actor=actor, action="benchmark.imported", obj=run, details={"format": fmt})
    return run


def benchmark_gate_check(*, version: ModelVersion, required: bool) -> None:
    """Raise BenchmarkGateError when a passing benchmark is required and `version` has none.

    Imported results count only when SWITCHYARD_ACCEPT_IMPORTED_BENCHMARKS is set.
    """
    accept_imported = settings.SWITCHYARD_ACCEPT_IMPORTED_BENCHMARKS
    if required and not selectors.version_has_passing_benchmark(
        version, accept_imported=accept_imported
    ):
        how = "run one or import one" if accept_imported else "run one on a staging cluster"
        note = "" if accept_imported else " (imported results do not count)"
        raise BenchmarkGateError(
            f"v{version.version} has no passing benchmark{note}: {how} before releasing"
        )
