"""Registry REST resources (API.md, Registry). Thin: one service or selector per method."""

from django.conf import settings
from django.http import FileResponse, Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import inputs
from accounts.errors import ErrorsSerializer, NotFound
from accounts.idempotency import idempotent
from accounts.lifecycle import Lifecycle
from accounts.pagination import PAGE_PARAMETERS, paginated
from accounts.permissions import AlgorithmWrites
from accounts.waits import WAIT_PARAMETER, group_name, long_poll
from integrations.triton.model_config.graph import is_ensemble, model_calls
from models_registry import selectors, services
from models_registry.downloads import version_archive
from models_registry.models import ModelVersion, model_name_validator, team_name_validator
from models_registry.services import Provenance
from models_registry.sla import sla_warning

RETURN_EXISTING = OpenApiParameter(
    "return_existing",
    bool,
    description="When the upload's files equal an existing version's, answer that version "
    "with 200 instead of 409.",
)


def _team_or_404(name: str):
    team = selectors.team_get(name=name)
    if team is None:
        raise Http404(f"No team named '{name}'.")
    return team


def _model_or_404(name: str):
    model = selectors.model_get(name=name)
    if model is None:
        raise Http404(f"No model named '{name}'.")
    return model


def _version_or_404(model, version: int):
    found = selectors.model_version_get(model=model, version=version)
    if found is None:
        raise Http404(f"Model '{model.name}' has no version {version}.")
    return found


class TeamOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    created_at = serializers.DateTimeField()


class TeamListCreateApi(APIView):
    """GET, POST /api/v1/teams/: everyone signed in reads; the algorithm team creates."""

    permission_classes = [AlgorithmWrites]

    class InputSerializer(inputs.InputSerializer):
        name = serializers.CharField(max_length=100, validators=[team_name_validator])

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: TeamOutputSerializer(many=True)})
    def get(self, request):
        return paginated(request, selectors.team_list(), TeamOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: TeamOutputSerializer})
    @idempotent
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team = services.team_create(name=data.validated_data["name"], actor=request.user)
        return Response(TeamOutputSerializer(team).data, status=status.HTTP_201_CREATED)


class MemberOutputSerializer(serializers.Serializer):
    username = serializers.CharField()


class TeamMemberInputSerializer(inputs.InputSerializer):
    username = serializers.CharField(max_length=150)


class TeamMembersApi(APIView):
    """GET, POST /api/v1/teams/{name}/members/ {"username"}: everyone reads; superusers add."""

    permission_classes = [IsAuthenticated]
    InputSerializer = TeamMemberInputSerializer

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: MemberOutputSerializer(many=True)})
    def get(self, request, name):
        members = selectors.team_members(team=_team_or_404(name))
        return paginated(request, members, MemberOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: MemberOutputSerializer(many=True)})
    def post(self, request, name):
        team = _team_or_404(name)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.team_member_add(
            team=team, username=data.validated_data["username"], actor=request.user
        )
        members = selectors.team_members(team=team)
        return Response(
            MemberOutputSerializer(members, many=True).data, status=status.HTTP_201_CREATED
        )


class TeamMemberApi(APIView):
    """DELETE /api/v1/teams/{name}/members/{username}/: superusers remove a member."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses={204: None})
    def delete(self, request, name, username):
        services.team_member_remove(team=_team_or_404(name), username=username, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SlaSerializer(inputs.InputSerializer):
    p99_latency_ms = serializers.FloatField(required=False, allow_null=True, min_value=0)
    min_success_rate = serializers.FloatField(
        required=False, allow_null=True, min_value=0, max_value=100
    )
    max_queue_ms = serializers.FloatField(required=False, allow_null=True, min_value=0)
    min_throughput_rps = serializers.FloatField(required=False, allow_null=True, min_value=0)
    p95_first_token_ms = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="A streaming model's p95 time to first token (generate_stream through the "
        "router); releases fail an interval whose candidate is above it.",
    )
    p95_inter_token_ms = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="A generative model's p95 time between tokens after the first, per stream "
        "(the router's pace over the model's own token count); releases fail an interval "
        "whose candidate is above it.",
    )
    min_tokens_per_s = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="A generative model's fewest output tokens per second after the first "
        "token that 95 % of its streams must get; releases fail an interval whose "
        "candidate's 5th percentile is below it.",
    )


class ModelOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    team = serializers.CharField(source="team.name")
    description = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    sla = serializers.SerializerMethodField()
    aliases = serializers.SerializerMethodField()
    next_version = serializers.IntegerField()
    warnings = serializers.SerializerMethodField(
        help_text="What the model lacks to be judged well (no SLA: what that means, how to "
        "set one)."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(SlaSerializer)
    def get_sla(self, obj) -> dict:
        return obj.sla  # floats or None, as stored: no field of a nested serializer per value

    def get_aliases(self, obj) -> dict:
        return dict(sorted((obj.alias_versions or {}).items()))

    def get_warnings(self, obj) -> list[str]:
        return [w for w in [sla_warning(obj.sla, model=obj.name)] if w]


class ModelListCreateApi(APIView):
    """GET (search, team, tag filters), POST /api/v1/models/."""

    permission_classes = [AlgorithmWrites]

    class InputSerializer(inputs.InputSerializer):
        name = serializers.CharField(max_length=128, validators=[model_name_validator])
        team = serializers.CharField()
        description = serializers.CharField(required=False, allow_blank=True, default="")
        tags = serializers.ListField(child=serializers.CharField(max_length=50), required=False)
        sla = SlaSerializer(required=False)

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: ModelOutputSerializer(many=True)})
    def get(self, request):
        q = request.query_params
        models = selectors.model_list(
            search=q.get("search", ""), team=q.get("team", ""), tag=q.get("tag", "")
        )
        return paginated(request, models, ModelOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: ModelOutputSerializer})
    @idempotent
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        model = services.model_create(actor=request.user, **data.validated_data)
        return Response(
            ModelOutputSerializer(selectors.model_get(name=model.name)).data,
            status=status.HTTP_201_CREATED,
        )


class ModelDetailApi(APIView):
    """GET, PATCH, DELETE /api/v1/models/{name}/ (description, tags, team, sla)."""

    permission_classes = [AlgorithmWrites]

    class InputSerializer(inputs.InputSerializer):
        team = serializers.CharField(required=False)
        description = serializers.CharField(required=False, allow_blank=True)
        tags = serializers.ListField(child=serializers.CharField(max_length=50), required=False)
        sla = SlaSerializer(required=False)

    @extend_schema(responses={200: ModelOutputSerializer})
    def get(self, request, name):
        return Response(ModelOutputSerializer(_model_or_404(name)).data)

    @extend_schema(request=InputSerializer, responses={200: ModelOutputSerializer})
    def patch(self, request, name):
        model = _model_or_404(name)
        data = self.InputSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        services.model_update(model=model, actor=request.user, **data.validated_data)
        return Response(ModelOutputSerializer(selectors.model_get(name=name)).data)

    @extend_schema(
        responses={
            204: None,
            409: OpenApiResponse(
                ErrorsSerializer, description="A version serves or served in production."
            ),
        }
    )
    def delete(self, request, name):
        services.model_delete(model=_model_or_404(name), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


VERSION_STATUSES = tuple(ModelVersion.Status.values)
_CHECKS = {"registered": "pending", "smoke_passed": "succeeded", "smoke_failed": "failed"}


# A version's checks: config validation passed at upload; the smoke test on a staging node
# is what stays pending (until a staging node runs it).
def _smoke(version) -> dict:
    validation = version.validation if isinstance(version.validation, dict) else {}
    smoke = validation.get("smoke")
    return smoke if isinstance(smoke, dict) else {}


def _checks_reason(version) -> str:
    smoke = _smoke(version)
    if smoke.get("passed"):
        return f"the smoke test passed on {smoke.get('node', 'a staging node')}"
    return str(smoke.get("error") or "the smoke test failed")


def _checks_waiting(version) -> str | None:
    smoke = _smoke(version)
    return f"a smoke test: {smoke.get('reason')}" if smoke.get("skipped") else None


VERSION_CHECKS = Lifecycle(
    states=("pending", "succeeded", "failed"),
    outcomes={"succeeded": "succeeded", "failed": "failed"},
    state_of=lambda version: _CHECKS[version.status],
    reason_of=_checks_reason,
    waiting_of=_checks_waiting,
)


class VersionSummarySerializer(serializers.Serializer):
    version = serializers.IntegerField()
    label = serializers.CharField()
    digest = serializers.CharField()
    state = VERSION_CHECKS.state_field("Its checks: pending until the smoke test ran.")
    finished = VERSION_CHECKS.finished_field()
    outcome = VERSION_CHECKS.outcome_field()
    outcome_reason = VERSION_CHECKS.outcome_reason_field()
    waiting_for = VERSION_CHECKS.waiting_for_field()
    status = serializers.ChoiceField(
        choices=VERSION_STATUSES, help_text="Deprecated (API 2.0.0): read `state`."
    )
    validation = serializers.JSONField()
    size_bytes = serializers.IntegerField()
    aliases = serializers.SerializerMethodField()
    derived_from = serializers.IntegerField(
        source="derived_from.version",
        default=None,
        allow_null=True,
        help_text="The version whose files this one shares with a changed config (derive).",
    )
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)
    created_at = serializers.DateTimeField()

    def get_aliases(self, obj) -> list[str]:
        return sorted(alias.name for alias in obj.aliases.all())


class VersionUploadedSerializer(VersionSummarySerializer):
    """The answer to an upload: the version, and what its model lacks to be judged well."""

    warnings = serializers.SerializerMethodField(
        help_text="The config's validation warnings, then the model's (no SLA)."
    )

    def get_warnings(self, obj) -> list[str]:
        found = [str(w.get("message", w)) if isinstance(w, dict) else str(w) for w in obj.warnings]
        missing = sla_warning(obj.model.sla, model=obj.model.name)
        return found + ([missing] if missing else [])


class VersionConfigSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="config.pbtxt as uploaded.")
    parsed = serializers.DictField(
        help_text="The config as protobuf JSON (Triton's ModelConfig; field names as in "
        "config.pbtxt, enums as their names). int64 and uint64 fields (dims, max_batch_size "
        "is int32 and stays a number) are strings, as protobuf's JSON mapping writes them: "
        'dims: ["-1", "4"].'
    )


class CallSerializer(serializers.Serializer):
    model = serializers.CharField()
    version = serializers.IntegerField(
        allow_null=True, help_text="The version called; null: the newest loaded."
    )
    kind = serializers.ChoiceField(
        choices=["ensemble_step", "declared"],
        help_text="An ensemble's step, or a BLS model's declared call (`switchyard.calls`).",
    )


def _call_kind(caller: ModelVersion) -> str:
    return "ensemble_step" if is_ensemble(caller.config_json) else "declared"


class VersionDetailSerializer(VersionSummarySerializer):
    model = serializers.CharField(source="model.name")
    config = serializers.SerializerMethodField()
    files = serializers.JSONField(source="manifest")
    provenance = serializers.SerializerMethodField()
    calls = serializers.SerializerMethodField(
        help_text="The models this version calls (its graph: deployed before it, kept while "
        "it serves)."
    )
    called_by = serializers.SerializerMethodField(
        help_text="The registered versions that call this one (a step pinned to it, or one "
        "taking its model's newest); `version` is the caller's."
    )

    @extend_schema_field(CallSerializer(many=True))
    def get_calls(self, obj) -> list[dict]:
        kind = _call_kind(obj)
        return [
            {"model": s.model, "version": s.version, "kind": kind}
            for s in model_calls(obj.config_json)
        ]

    @extend_schema_field(CallSerializer(many=True))
    def get_called_by(self, obj) -> list[dict]:
        return [
            {
                "model": caller.model.name,
                "version": caller.version,
                "kind": _call_kind(caller),
            }
            for caller, _step in selectors.version_callers(version=obj)
        ]

    @extend_schema_field(VersionConfigSerializer)
    def get_config(self, obj) -> dict:
        return {"text": obj.config_text, "parsed": obj.config_json}

    def get_provenance(self, obj) -> dict:
        return {
            "source_commit": obj.source_commit,
            "training_run_url": obj.training_run_url,
            "notes": obj.notes,
        }


class VersionListCreateApi(APIView):
    """GET /api/v1/models/{name}/versions/ (newest first); POST a multipart `archive`."""

    permission_classes = [AlgorithmWrites]
    parser_classes = [MultiPartParser]

    class InputSerializer(inputs.InputSerializer):
        archive = inputs.UploadField()
        label = serializers.CharField(required=False, allow_blank=True, max_length=100)
        notes = serializers.CharField(required=False, allow_blank=True)
        source_commit = serializers.CharField(required=False, allow_blank=True, max_length=100)
        training_run_url = serializers.URLField(required=False, allow_blank=True, max_length=500)

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: VersionSummarySerializer(many=True)})
    def get(self, request, name):
        versions = selectors.model_versions(model=_model_or_404(name))
        return paginated(request, versions, VersionSummarySerializer)

    @extend_schema(
        request=InputSerializer,
        parameters=[RETURN_EXISTING],
        responses={
            201: VersionUploadedSerializer,
            200: OpenApiResponse(
                VersionUploadedSerializer, description="return_existing: the same files' version."
            ),
            409: OpenApiResponse(ErrorsSerializer, description="The same files are a version."),
        },
    )
    def post(self, request, name):
        model = _model_or_404(name)
        # Before the body is read: an outsider's upload is not even parsed.
        services.team_write_check(
            actor=request.user, team=model.team, what=f"Uploading a version of '{name}'"
        )
        limit = settings.SWITCHYARD_MAX_UPLOAD_BYTES
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            message = f"The upload is larger than the limit of {limit} bytes."
            return Response(
                {"errors": [{"field": "archive", "message": message}]},
                status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        return self._register(request, model)

    @idempotent
    def _register(self, request, model):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        archive = fields.pop("archive")
        try:
            version = services.model_version_register(
                model=model,
                archive=archive,
                actor=request.user,
                provenance=Provenance(**fields),
                refuse_duplicate=True,
            )
        except services.DuplicateVersion as exc:
            if request.query_params.get("return_existing") not in ("true", "1"):
                raise
            return Response(VersionUploadedSerializer(exc.version).data)
        finally:
            archive.close()
        return Response(VersionUploadedSerializer(version).data, status=status.HTTP_201_CREATED)


class VersionDeriveApi(APIView):
    """POST /api/v1/models/{name}/versions/{version}/derive/: the model's next version with
    this version's files and a changed config (the whole `config_text`, or `config_patch`:
    top-level ModelConfig fields replacing the source's, null removing one), checked as an
    upload is. 409 when Triton would read the config as the source's, or when it is another
    version's config (that version is named)."""

    permission_classes = [AlgorithmWrites]
    parser_classes = [JSONParser]

    class InputSerializer(inputs.InputSerializer):
        config_text = serializers.CharField(
            required=False,
            max_length=1024 * 1024,
            trim_whitespace=False,
            help_text="The new config.pbtxt, whole (its name must stay the model's).",
        )
        config_patch = serializers.DictField(
            required=False,
            allow_empty=False,
            help_text="Top-level ModelConfig fields as protobuf JSON, each replacing the "
            'source\'s whole (null removes it): {"dynamic_batching": '
            '{"max_queue_delay_microseconds": 2000}, "instance_group": [{"count": 2, '
            '"kind": "KIND_CPU"}]}.',
        )
        label = serializers.CharField(required=False, allow_blank=True, max_length=100)
        notes = serializers.CharField(required=False, allow_blank=True)
        source_commit = serializers.CharField(required=False, allow_blank=True, max_length=100)

        def validate(self, attrs):
            if ("config_text" in attrs) == ("config_patch" in attrs):
                raise serializers.ValidationError(
                    {"config_text": "Give either config_text or config_patch."}
                )
            return attrs

    @extend_schema(
        request=InputSerializer,
        responses={
            201: VersionUploadedSerializer,
            409: OpenApiResponse(
                ErrorsSerializer,
                description="The config is the source's as Triton reads it, or another "
                "version's (named).",
            ),
        },
    )
    def post(self, request, name, version):
        model = _model_or_404(name)
        source = _version_or_404(model, version)
        services.team_write_check(
            actor=request.user, team=model.team, what=f"Deriving a version of '{name}'"
        )
        return self._derive(request, source)

    @idempotent
    def _derive(self, request, source):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        derived = services.model_version_derive(
            source=source,
            actor=request.user,
            config_text=fields.pop("config_text", None),
            config_patch=fields.pop("config_patch", None),
            provenance=Provenance(**fields),
        )
        return Response(VersionUploadedSerializer(derived).data, status=status.HTTP_201_CREATED)


class VersionDetailApi(APIView):
    """GET, DELETE /api/v1/models/{name}/versions/{version}/ (delete: 409 while serving)."""

    permission_classes = [AlgorithmWrites]

    def _get(self, name, version):
        return _version_or_404(_model_or_404(name), version)

    @extend_schema(parameters=[WAIT_PARAMETER], responses={200: VersionDetailSerializer})
    def get(self, request, name, version):
        return Response(VersionDetailSerializer(self._get(name, version)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, name, version):
        services.model_version_delete(version=self._get(name, version), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _version_finished(*, name: str, version: int) -> bool:
    model = selectors.model_get(name=name)
    found = model and selectors.model_version_get(model=model, version=version)
    return not found or VERSION_CHECKS.finished(found)


def _version_groups(*, name: str, version: int) -> list[str]:
    found = ModelVersion.objects.filter(model__name=name, version=version).first()
    return [group_name("version", found.pk)] if found else []


version_detail = long_poll(VersionDetailApi, groups=_version_groups, finished=_version_finished)


class VersionArchiveApi(APIView):
    """GET /api/v1/models/{name}/versions/{version}/archive/: the stored files as .tar.gz."""

    @extend_schema(
        responses={
            (200, "application/gzip"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The version's files as a .tar.gz."
            )
        }
    )
    def get(self, request, name, version):
        found = _version_or_404(_model_or_404(name), version)
        filename = f"{name}-v{found.version}.tar.gz"
        return FileResponse(
            version_archive(found),
            as_attachment=True,
            filename=filename,
            content_type="application/gzip",
        )


class AliasSetApi(APIView):
    """PUT /api/v1/models/{name}/aliases/{alias}/ {"version"}."""

    permission_classes = [AlgorithmWrites]

    class InputSerializer(inputs.InputSerializer):
        version = serializers.IntegerField(min_value=1)

    class OutputSerializer(serializers.Serializer):
        model = serializers.CharField()
        alias = serializers.CharField()
        version = serializers.IntegerField()

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer})
    def put(self, request, name, alias):
        model = _model_or_404(name)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        target = selectors.model_version_get(model=model, version=data.validated_data["version"])
        if target is None:
            wanted = data.validated_data["version"]
            raise NotFound(f"Model '{name}' has no version {wanted}.", field="version")
        services.alias_set(model=model, name=alias, version=target, actor=request.user)
        return Response({"model": name, "alias": alias, "version": target.version})
