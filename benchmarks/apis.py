"""Benchmark REST resources (API.md, Benchmarks): start, read, cancel, import, list."""

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import inputs
from accounts.errors import NotFound, Refused
from accounts.idempotency import idempotent
from accounts.lifecycle import Lifecycle
from accounts.pagination import PAGE_PARAMETERS, ListFilters, list_filters, paginated
from accounts.permissions import AlgorithmWrites
from accounts.waits import WAIT_PARAMETER, group_name, long_poll
from benchmarks import selectors, services
from benchmarks.models import BenchmarkRun
from deployments.selectors import cluster_get
from models_registry.selectors import model_version_find, model_version_or_404

MAX_IMPORT_BYTES = 5 * 1024 * 1024


def _verdict_outcome(run, outcome: str) -> str:
    """A run that finished but missed its verdict (SLA or production baseline) failed."""
    verdict = run.verdict if isinstance(run.verdict, dict) else {}
    return "failed" if outcome == "succeeded" and verdict.get("passed") is False else outcome


def _benchmark_reason(run) -> str:
    verdict = run.verdict if isinstance(run.verdict, dict) else {}
    if run.error:
        return run.error
    if verdict.get("passed") is False:
        return "; ".join(str(r) for r in verdict.get("reasons") or []) or "the verdict failed"
    return "the verdict passed" if verdict.get("passed") else str(run.status)


BENCHMARK = Lifecycle(
    states=tuple(BenchmarkRun.Status.values),
    outcomes={"succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled"},
    state_of=lambda run: run.status,
    reason_of=_benchmark_reason,
    refine=_verdict_outcome,
)
_DEPRECATED = "Deprecated (API 2.0.0): read `state`."


class BenchmarkSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    model = serializers.CharField(source="version.model.name")
    version = serializers.IntegerField(source="version.version")
    source = serializers.ChoiceField(choices=BenchmarkRun.Source.values)
    state = BENCHMARK.state_field()
    finished = BENCHMARK.finished_field()
    outcome = BENCHMARK.outcome_field()
    outcome_reason = BENCHMARK.outcome_reason_field()
    status = serializers.ChoiceField(choices=BENCHMARK.states, help_text=_DEPRECATED)
    cluster = serializers.CharField(source="cluster.name", default=None, allow_null=True)
    node = serializers.CharField(source="node_name")
    concurrency = serializers.ListField(child=serializers.IntegerField())
    duration_s = serializers.FloatField()
    batch_size = serializers.IntegerField()
    stream_body = serializers.JSONField(
        help_text="A decoupled model's generate request each stream sent ({}: generated). Its "
        "levels add `streams`, `first_token_p50_ms`, `first_token_p95_ms`, "
        "`inter_token_p95_ms`, `tokens_per_s_p5` (a stream's rate after its first event), "
        "`tokens_per_stream` and `tokens_per_s` (events: one response a token)."
    )
    level_index = serializers.IntegerField()
    progress_pct = serializers.FloatField()
    cancel_requested = serializers.BooleanField()
    levels = serializers.JSONField(source="results")
    verdict = serializers.JSONField()
    error = serializers.CharField()
    file_name = serializers.CharField()
    requested_by = serializers.CharField(
        source="requested_by.username", default=None, allow_null=True
    )
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class BenchmarkAcceptedSerializer(serializers.Serializer):
    """202 of a queued or cancelled run: GET /api/v1/benchmarks/{id}/?wait=60 follows it."""

    id = serializers.IntegerField()
    state = BENCHMARK.state_field()
    finished = BENCHMARK.finished_field()
    outcome = BENCHMARK.outcome_field()
    outcome_reason = BENCHMARK.outcome_reason_field()
    status = serializers.ChoiceField(choices=BENCHMARK.states, help_text=_DEPRECATED)


class BenchmarkFilters(ListFilters):
    state = serializers.ChoiceField(choices=BenchmarkRun.Status.values, required=False)


class BenchmarkCreateApi(APIView):
    """GET (filtered, paged), POST /api/v1/benchmarks/ {"model","version","cluster",...} -> 202."""

    permission_classes = [AlgorithmWrites]

    @extend_schema(
        parameters=[BenchmarkFilters, *PAGE_PARAMETERS],
        responses={200: BenchmarkSerializer(many=True)},
    )
    def get(self, request):
        runs = selectors.benchmark_list(**list_filters(request, BenchmarkFilters))
        return paginated(request, runs, BenchmarkSerializer)

    class InputSerializer(inputs.InputSerializer):
        model = serializers.CharField()
        version = serializers.IntegerField(min_value=1)
        cluster = serializers.CharField()
        # Ranges: BENCHMARK_MAX_* and the tensor limits (checked by benchmark_create).
        concurrency = serializers.ListField(
            child=serializers.IntegerField(), default=[1, 4, 16], max_length=32
        )
        duration_s = serializers.FloatField(default=10.0)
        batch_size = serializers.IntegerField(min_value=1, max_value=2**31 - 1, default=1)
        dims_override = serializers.DictField(
            child=serializers.ListField(
                child=serializers.IntegerField(min_value=0, max_value=2**62), max_length=16
            ),
            required=False,
        )
        stream_body = serializers.DictField(
            required=False,
            help_text="A decoupled model's generate request each stream sends (input name to "
            'value, e.g. {"PROMPT": "a ticket of 40 words ...", "MAX_TOKENS": 64}: a prompt '
            "and an output of set lengths); without it, one made from generated inputs.",
        )

    @extend_schema(request=InputSerializer, responses={202: BenchmarkAcceptedSerializer})
    @idempotent
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = dict(data.validated_data)
        model, number = body.pop("model"), body.pop("version")
        version = model_version_find(model_name=model, version=number)
        if version is None:
            raise NotFound(f"Model '{model}' has no version {number}.", field="version")
        cluster = cluster_get(name=body.pop("cluster"))
        if cluster is None:
            raise NotFound(f"No cluster named '{request.data.get('cluster')}'.", field="cluster")
        run = services.benchmark_create(
            version=version, cluster=cluster, actor=request.user, **body
        )
        return Response(BenchmarkAcceptedSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class BenchmarkDetailApi(APIView):
    """GET /api/v1/benchmarks/{id}/[?wait=s]: per-level numbers, progress and verdict."""

    @extend_schema(parameters=[WAIT_PARAMETER], responses={200: BenchmarkSerializer})
    def get(self, request, run_id):
        run = selectors.benchmark_get(run_id=run_id)
        if run is None:
            raise Http404(f"No benchmark {run_id}.")
        return Response(BenchmarkSerializer(run).data)


def _benchmark_finished(*, run_id: int) -> bool:
    found = selectors.benchmark_get(run_id=run_id)
    return found is None or BENCHMARK.finished(found)


benchmark_detail = long_poll(
    BenchmarkDetailApi,
    groups=lambda run_id: [group_name("benchmark", run_id)],
    finished=_benchmark_finished,
)


class BenchmarkCancelApi(APIView):
    """POST /api/v1/benchmarks/{id}/cancel/ -> 202; 409 when it already finished."""

    permission_classes = [AlgorithmWrites]

    @extend_schema(request=None, responses={202: BenchmarkAcceptedSerializer})
    def post(self, request, run_id):
        run = selectors.benchmark_get(run_id=run_id)
        if run is None:
            raise Http404(f"No benchmark {run_id}.")
        run = services.benchmark_cancel(run=run, actor=request.user)
        return Response(BenchmarkAcceptedSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class VersionBenchmarksApi(APIView):
    """GET /api/v1/models/{name}/versions/{v}/benchmarks/: a version's runs, newest first."""

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: BenchmarkSerializer(many=True)})
    def get(self, request, name, version):
        runs = selectors.version_benchmarks(
            version=model_version_or_404(model_name=name, version=version)
        )
        return paginated(request, runs, BenchmarkSerializer)


class BenchmarkImportApi(APIView):
    """POST /api/v1/models/{name}/versions/{v}/benchmarks/import/ (multipart file, format)."""

    permission_classes = [AlgorithmWrites]
    parser_classes = [MultiPartParser]

    class InputSerializer(inputs.InputSerializer):
        file = inputs.UploadField()
        format = serializers.ChoiceField(choices=["perf_analyzer", "model_analyzer"])

    @extend_schema(request=InputSerializer, responses={201: BenchmarkSerializer})
    @idempotent
    def post(self, request, name, version):
        found = model_version_or_404(model_name=name, version=version)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            message = f"The file is larger than {MAX_IMPORT_BYTES} bytes."
            raise Refused(message, file=upload.name)
        run = services.benchmark_import(
            version=found,
            fmt=data.validated_data["format"],
            data=upload.read(),
            file_name=upload.name,
            actor=request.user,
        )
        return Response(BenchmarkSerializer(run).data, status=status.HTTP_201_CREATED)
