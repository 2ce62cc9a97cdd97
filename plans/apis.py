"""Release plan REST resources (docs/RELEASE_PLANS.md)."""

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import inputs
from accounts.errors import NotFound
from accounts.idempotency import idempotent
from accounts.lifecycle import Lifecycle
from accounts.pagination import PAGE_PARAMETERS, ListFilters, list_filters, paginated
from accounts.permissions import ReleaseManagersWrite
from accounts.waits import WAIT_PARAMETER, group_name, long_poll
from models_registry.selectors import model_version_find
from plans import selectors, services
from plans.state_machine import ACTIONS, ON_FAILURE, Phase
from releases.apis import ReleaseSettingsInput

MAX_COMMENT = 2000


def _plan_waiting(plan) -> str | None:
    if plan.pending_action:
        return None  # a person acted; the next tick takes it
    wave = plan.wave_index + 1
    if plan.phase == Phase.WAITING_APPROVAL.value:
        author = plan.created_by.get_username() if plan.created_by else "its author"
        return f"approval of wave {wave} by a release manager other than {author} (action approve)"
    if plan.phase == Phase.HALTED.value:
        return f"a resume or a rollback (halted: {plan.reason})"
    return None


PLAN = Lifecycle(
    states=tuple(p.value.lower() for p in Phase),
    outcomes={"succeeded": "succeeded", "refused": "cancelled", "rolled_back": "rolled_back"},
    state_of=lambda plan: str(plan.phase).lower(),
    reason_of=lambda plan: plan.reason,
    waiting_of=_plan_waiting,
)


class CellSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    release = serializers.IntegerField(allow_null=True, help_text="its release once started")
    phase = serializers.CharField(allow_null=True, help_text="the release's phase")
    weight = serializers.FloatField(allow_null=True, help_text="the candidate's share, %")
    step = serializers.CharField(allow_null=True, help_text="its step, as 2/3")
    gate = serializers.CharField(
        allow_null=True, help_text="its last gate's result (pass, fail, inconclusive)"
    )
    gate_failed = serializers.ListField(
        child=serializers.CharField(), help_text="the checks its last gate failed"
    )
    error = serializers.CharField(help_text="why its release could not start ('' if it did)")
    revert = serializers.IntegerField(
        allow_null=True, help_text="the release that brought the baseline back (plan rollback)"
    )
    revert_phase = serializers.CharField(allow_null=True)
    revert_error = serializers.CharField(help_text="why the baseline could not be brought back")


class WaveSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    bake_s = serializers.FloatField()
    approval = serializers.BooleanField()
    release = serializers.DictField(help_text="the release settings of this wave")
    clusters = CellSerializer(many=True)


class ApprovalSerializer(serializers.Serializer):
    wave = serializers.IntegerField(help_text="0-based")
    decision = serializers.CharField()
    actor = serializers.CharField(source="actor_name")
    comment = serializers.CharField()
    created_at = serializers.DateTimeField()


class PlanEventSerializer(serializers.Serializer):
    kind = serializers.CharField()
    phase = serializers.CharField()
    wave = serializers.IntegerField()
    message = serializers.CharField()
    actor = serializers.CharField()
    created_at = serializers.DateTimeField()


class PlanSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    model = serializers.CharField(source="model.name")
    candidate_version = serializers.IntegerField(source="candidate.version")
    state = PLAN.state_field()
    finished = PLAN.finished_field()
    outcome = PLAN.outcome_field()
    outcome_reason = PLAN.outcome_reason_field()
    waiting_for = PLAN.waiting_for_field()
    wave_index = serializers.IntegerField(help_text="the current wave, 0-based")
    reason = serializers.CharField()
    on_failure = serializers.CharField()
    pending_action = serializers.JSONField(allow_null=True)
    created_by = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_created_by(self, plan) -> str:
        return plan.created_by.get_username() if plan.created_by else ""


class PlanDetailSerializer(PlanSerializer):
    waves = serializers.SerializerMethodField()
    approvals = ApprovalSerializer(many=True)
    events = PlanEventSerializer(many=True)

    @extend_schema_field(WaveSerializer(many=True))
    def get_waves(self, plan) -> list[dict]:
        return WaveSerializer(selectors.plan_waves(plan), many=True).data


class PlanFilters(ListFilters):
    state = serializers.ChoiceField(choices=[p.value.lower() for p in Phase], required=False)


def _detail(plan_id: int) -> dict:
    plan = selectors.plan_get(plan_id=plan_id)
    if plan is None:
        raise Http404(f"No release plan {plan_id}.")
    return PlanDetailSerializer(plan).data


def waves_of(values: dict) -> list[dict]:
    """The waves of a validated plan body as plan_create takes them."""
    return [{**w, "release": dict(w.get("release") or {})} for w in values["waves"]]


class PlanListCreateApi(APIView):
    """GET, POST /api/v1/release-plans/."""

    permission_classes = [ReleaseManagersWrite]

    class WaveInput(inputs.InputSerializer):
        clusters = serializers.ListField(
            child=serializers.CharField(max_length=100), min_length=1,
            max_length=services.MAX_CLUSTERS_PER_WAVE,
        )  # fmt: skip
        release = ReleaseSettingsInput(required=False)
        bake_s = serializers.FloatField(min_value=0, max_value=services.MAX_BAKE_S, default=0)
        approval = serializers.BooleanField(default=False)

    class InputSerializer(inputs.InputSerializer):
        model = serializers.CharField()
        candidate_version = serializers.IntegerField(min_value=1)
        waves = serializers.ListField(min_length=1, max_length=services.MAX_WAVES)
        on_failure = serializers.ChoiceField(choices=list(ON_FAILURE), default="halt")

        def validate_waves(self, waves):
            out = []
            for i, wave in enumerate(waves):
                data = PlanListCreateApi.WaveInput(data=wave)
                if not data.is_valid():
                    raise serializers.ValidationError({str(i): data.errors})
                out.append(dict(data.validated_data))
            return out

    @extend_schema(
        parameters=[PlanFilters, *PAGE_PARAMETERS], responses={200: PlanSerializer(many=True)}
    )
    def get(self, request):
        filters = list_filters(request, PlanFilters)
        plans = selectors.plan_list(**filters)
        return paginated(request, plans, PlanSerializer)

    @extend_schema(request=InputSerializer, responses={201: PlanDetailSerializer})
    @idempotent
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        candidate = model_version_find(
            model_name=values["model"], version=values["candidate_version"]
        )
        if candidate is None:
            version, model = values["candidate_version"], values["model"]
            raise NotFound(f"No version {version} of model '{model}'.", field="candidate_version")
        plan = services.plan_create(
            candidate=candidate,
            waves=waves_of(values),
            actor=request.user,
            on_failure=values["on_failure"],
        )
        return Response(_detail(plan.pk), status=status.HTTP_201_CREATED)


class PlanDetailApi(APIView):
    """GET /api/v1/release-plans/{id}/[?wait=s]."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(parameters=[WAIT_PARAMETER], responses={200: PlanDetailSerializer})
    def get(self, request, plan_id):
        return Response(_detail(plan_id))


def _plan_settled(*, plan_id: int) -> bool:
    """A waiter wakes when the plan ended or waits for a person (an approval, a resume)."""
    plan = selectors.plan_get(plan_id=plan_id)
    return plan is None or PLAN.finished(plan) or PLAN.waiting_for(plan) is not None


plan_detail = long_poll(
    PlanDetailApi,
    # Woken by the plan's and its cells' saves (plans/apps.py).
    groups=lambda plan_id: [group_name("plan", plan_id)],
    finished=_plan_settled,
)


class PlanActionApi(APIView):
    """POST /api/v1/release-plans/{id}/actions/ {"action", "comment"}: approve or refuse the
    wave waiting (never the plan's author), halt, resume or roll back every release of it."""

    permission_classes = [ReleaseManagersWrite]

    class InputSerializer(inputs.InputSerializer):
        action = serializers.ChoiceField(choices=list(ACTIONS))
        comment = serializers.CharField(required=False, allow_blank=True, default="",
                                        max_length=MAX_COMMENT)  # fmt: skip

    @extend_schema(request=InputSerializer, responses={200: PlanDetailSerializer})
    def post(self, request, plan_id):
        plan = selectors.plan_get(plan_id=plan_id)
        if plan is None:
            raise Http404(f"No release plan {plan_id}.")
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.plan_action(plan=plan, actor=request.user, **data.validated_data)
        return Response(_detail(plan_id))
