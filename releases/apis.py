"""Releases REST resources (API.md, Releases)."""

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
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
from deployments.models import TritonCluster
from deployments.selectors import cluster_get
from integrations.routers.base import MAX_HEADER_NAME
from models_registry.selectors import model_version_find
from releases import selectors, services
from releases.inputs import (
    MAX_STEPS,
    PROGRESS_DEADLINE_S,
    SHADOW_S,
    SHADOW_SHARE,
    STEP_INTERVAL_S,
)
from releases.state_machine import Phase


def _release_waiting(release) -> str | None:
    if release.pending_action:
        return None  # a person acted; the next tick takes it
    if release.phase == Phase.WAITING_APPROVAL.value:
        steps = release.steps or []
        step = steps[release.step_index] if release.step_index < len(steps) else {}
        weight = step.get("weight") if isinstance(step, dict) else None
        at = f" ({weight:g}%)" if isinstance(weight, int | float) else ""
        return f"approval to enter step {release.step_index + 1}{at} (action approve)"
    if release.phase == Phase.PAUSED.value:
        return f"a resume or a rollback (paused: {release.reason})"
    return None


RELEASE = Lifecycle(
    states=tuple(p.value.lower() for p in Phase),
    outcomes={"succeeded": "succeeded", "rolled_back": "rolled_back", "failed": "failed"},
    state_of=lambda release: str(release.phase).lower(),
    # Releases finished before `outcome_reason` was stored keep their last phase's message.
    reason_of=lambda release: release.outcome_reason or release.reason,
    waiting_of=_release_waiting,
)


class EventSerializer(serializers.Serializer):
    kind = serializers.CharField()
    phase = serializers.CharField()
    message = serializers.CharField()
    data = serializers.JSONField()
    actor = serializers.CharField()
    created_at = serializers.DateTimeField()


class ReleaseSlaSerializer(serializers.Serializer):
    """The model's SLA when the release started: what its gates judge against."""

    p99_latency_ms = serializers.FloatField(required=False, allow_null=True)
    min_success_rate = serializers.FloatField(required=False, allow_null=True)
    max_queue_ms = serializers.FloatField(required=False, allow_null=True)
    min_throughput_rps = serializers.FloatField(required=False, allow_null=True)
    p95_first_token_ms = serializers.FloatField(required=False, allow_null=True)
    p95_inter_token_ms = serializers.FloatField(required=False, allow_null=True)
    min_tokens_per_s = serializers.FloatField(required=False, allow_null=True)


class UnroutedMeasureSerializer(serializers.Serializer):
    """A model's traffic that did not go through the router's HTTP split (releases/unrouted.py)."""

    share = serializers.FloatField(allow_null=True, help_text="0..1; null when not measured")
    share_percent = serializers.CharField()
    triton_requests = serializers.IntegerField(help_text="Triton's counters, all nodes")
    split_requests = serializers.IntegerField(help_text="through the router's HTTP split")
    unrouted_requests = serializers.IntegerField()
    window_start = serializers.FloatField(allow_null=True, help_text="epoch seconds")
    window_end = serializers.FloatField(allow_null=True, help_text="epoch seconds")
    grpc_via_router = serializers.IntegerField(
        allow_null=True, help_text="gRPC infer calls through the router (every model)"
    )
    versioned_via_router = serializers.IntegerField(allow_null=True)
    why = serializers.CharField()
    text = serializers.CharField(help_text="The measurement in words, naming the clients")


class UnroutedAtStartSerializer(UnroutedMeasureSerializer):
    max_share = serializers.FloatField(help_text="analysis.max_unrouted_share")
    over = serializers.BooleanField()
    confirmed = serializers.BooleanField(help_text="started above the limit (confirm_unrouted)")
    confirmed_by = serializers.CharField()


class UnroutedSerializer(serializers.Serializer):
    at_start = UnroutedAtStartSerializer(allow_null=True)
    latest = UnroutedMeasureSerializer(allow_null=True)


class ReleaseCallerSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="The ensemble calling the released model.")
    version = serializers.IntegerField(help_text="Its version serving on the cluster.")
    served_as = serializers.CharField(
        help_text="Its sibling `<model>--c<version>`: the same version calling the "
        "candidate's sibling, sent the candidate's share of its requests."
    )
    sla = serializers.JSONField(help_text="Its SLA as the release started: judged against it.")


class ReleaseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    cluster = serializers.CharField(source="cluster.name")
    model = serializers.CharField(source="model.name")
    baseline_version = serializers.IntegerField(source="baseline.version")
    candidate_version = serializers.IntegerField(source="candidate.version")
    strategy = serializers.ChoiceField(choices=["canary", "blue_green"])
    steps = serializers.JSONField()
    step_interval_s = serializers.FloatField()
    analysis = serializers.JSONField()
    sla = ReleaseSlaSerializer()
    sticky_header = serializers.CharField()
    shadow_s = serializers.FloatField(
        help_text="Seconds of shadow before the first step (0: none)."
    )
    shadow_share = serializers.FloatField(help_text="Percent of requests mirrored in the shadow.")
    router_mirror = serializers.FloatField(
        allow_null=True, help_text="Percent the router mirrors to the candidate now."
    )
    agreement = serializers.JSONField(help_text="The answer comparer's settings ({}: none).")
    agreement_result = serializers.JSONField(
        source="agreement_state",
        help_text="What the comparer found: `compared`, `agreed`, `skipped`, `over_rate`, "
        "`baseline_requests` (its extra load), `outputs` ({name: [compared, agreed]}), "
        "`examples` (disagreeing inputs, cut to 300 characters).",
    )
    candidate_served_as = serializers.SerializerMethodField(
        help_text="The model name the candidate serves under on the nodes: the model's own, "
        "or its sibling `<model>--c<version>` when its config differs from the baseline's "
        "(a config canary: clients keep calling the model's name, the router sends the "
        "candidate's share to the sibling)."
    )
    callers = serializers.SerializerMethodField(
        help_text="A graph release's callers: each ensemble serving on the cluster that calls "
        "the model at its newest version; judged on its own SLA each interval "
        "(`last_analysis.callers`). [] for none."
    )
    step_loads = serializers.JSONField(
        help_text="What the candidate (an ensemble) pins that the cluster did not serve: "
        "[{model, version, served_as}], each served under the step's sibling `served_as` "
        "while the candidate is (its own sibling calls it there), then added to the step's "
        "own versions at promotion, before the candidate loads under its model's name. [] "
        "for none."
    )
    state = RELEASE.state_field()
    finished = RELEASE.finished_field()
    outcome = RELEASE.outcome_field()
    outcome_reason = RELEASE.outcome_reason_field()
    waiting_for = RELEASE.waiting_for_field()
    phase = serializers.ChoiceField(
        choices=[p.value for p in Phase],
        help_text="Deprecated (API 2.0.0): `state` in upper case, as 1.x answered it.",
    )
    step_index = serializers.IntegerField()
    candidate_weight = serializers.FloatField()
    router_weight = serializers.FloatField(allow_null=True)
    failed_checks = serializers.IntegerField()
    inconclusive_checks = serializers.IntegerField()
    reason = serializers.CharField()
    warnings = serializers.ListField(
        child=serializers.CharField(),
        help_text="What could keep it from being judged, found at the start (no SLA; too "
        "little routed traffic for the first step's min_requests, with the rate it needs).",
    )
    pending_action = serializers.JSONField()
    last_analysis = serializers.JSONField()
    unrouted = serializers.SerializerMethodField(
        help_text="The model's traffic that bypassed the router's HTTP split: `at_start` "
        "(measured when the release was created, with the limit and any confirmation) and "
        "`latest` (the last judged analysis interval); each has `share` (0..1, null when not "
        "measured), `triton_requests`, `split_requests` and `text`."
    )
    router_url = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_candidate_served_as(self, obj) -> str:
        return obj.candidate_name or obj.model.name

    @extend_schema_field(ReleaseCallerSerializer(many=True))
    def get_callers(self, obj) -> list[dict]:
        return list(obj.callers or [])

    @extend_schema_field(UnroutedSerializer)
    def get_unrouted(self, obj) -> dict:
        latest = (obj.last_analysis or {}).get("unrouted")
        return {"at_start": obj.unrouted_at_start or None, "latest": latest}

    def get_router_url(self, obj) -> str:
        router = obj.cluster.router
        return str(router.get("url", "")) if isinstance(router, dict) else ""


# A release's detail embeds its latest events and analyses; the whole log is paginated at
# GET /api/v1/releases/{id}/events/.
DETAIL_EVENTS = 100
DETAIL_ANALYSES = 50


class ConfigChangeSerializer(serializers.Serializer):
    path = serializers.CharField(help_text='e.g. "dynamic_batching.max_queue_delay_microseconds"')
    baseline = serializers.CharField(help_text="the baseline's value as text")
    candidate = serializers.CharField(help_text="the candidate's value as text")


class ReleaseDetailSerializer(ReleaseSerializer):
    config_changes = serializers.SerializerMethodField(
        help_text="Where the candidate's config serves differently from the baseline's; "
        "non-empty for a config canary."
    )
    analyses = serializers.SerializerMethodField()
    events = serializers.SerializerMethodField()

    @extend_schema_field(ConfigChangeSerializer(many=True))
    def get_config_changes(self, obj) -> list[dict]:
        return selectors.release_config_changes(obj)

    def get_analyses(self, obj) -> list[dict]:
        recent = selectors.release_recent_events(
            release=obj, limit=DETAIL_ANALYSES, kind="analysis"
        )
        return [e.data for e in recent]

    @extend_schema_field(EventSerializer(many=True))
    def get_events(self, obj) -> list:
        recent = selectors.release_recent_events(release=obj, limit=DETAIL_EVENTS)
        return EventSerializer(recent, many=True).data


class ReleaseFilters(ListFilters):
    state = serializers.ChoiceField(choices=[p.value.lower() for p in Phase], required=False)


class ReleaseSettingsInput(inputs.InputSerializer):
    """How a release runs (steps, intervals, analysis, gates): a release's start and each wave
    of a release plan take these."""

    strategy = serializers.ChoiceField(choices=["canary", "blue_green"], default="canary")
    # Ranges and cross-field rules: releases/inputs.py (checked by release_create).
    steps = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=100),
        required=False,
        max_length=MAX_STEPS,
    )
    step_interval_s = serializers.FloatField(
        min_value=STEP_INTERVAL_S[0], max_value=STEP_INTERVAL_S[1], default=30
    )
    analysis = serializers.DictField(required=False)
    manual_gates = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=100),
        required=False,
        max_length=MAX_STEPS,
    )
    sticky_header = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_HEADER_NAME
    )
    progress_deadline_s = serializers.FloatField(
        min_value=PROGRESS_DEADLINE_S[0], max_value=PROGRESS_DEADLINE_S[1], default=600
    )
    shadow_s = serializers.FloatField(
        min_value=SHADOW_S[0],
        max_value=SHADOW_S[1],
        default=0,
        help_text="Seconds of shadow before the first step (0: none): the router mirrors "
        "`shadow_share` % of the model's requests to the candidate, its answers thrown away, "
        "and the candidate is judged on them (errors, latency) before any client gets it.",
    )
    shadow_share = serializers.FloatField(
        min_value=SHADOW_SHARE[0],
        max_value=SHADOW_SHARE[1],
        required=False,
        allow_null=True,
        default=None,
        help_text="Percent of the model's requests mirrored during the shadow (default 100).",
    )
    agreement = serializers.DictField(
        required=False,
        help_text="Compare answers during the shadow: `sample_share` (% of the copies, "
        "default 10), `max_per_s` (comparisons a second, the extra load on the baseline, "
        "default 5), `rtol`/`atol` for float outputs (default 1e-5/1e-6), `outputs` "
        "({name: {rtol, atol}}), `min_agreement` (0..1: the gate; none by default), "
        "`min_compared` (default 50). Needs `shadow_s`.",
    )
    require_benchmark = serializers.BooleanField(required=False, allow_null=True, default=None)


class ReleaseListCreateApi(APIView):
    """GET, POST /api/v1/releases/."""

    permission_classes = [ReleaseManagersWrite]

    class InputSerializer(ReleaseSettingsInput):
        cluster = serializers.CharField()
        model = serializers.CharField()
        candidate_version = serializers.IntegerField(min_value=1)
        dry_run = serializers.BooleanField(
            default=False, help_text="Run every check, start nothing: 200 with the plan."
        )
        confirm_unrouted = serializers.BooleanField(
            default=False,
            help_text="Start even when the model's unrouted share (traffic that bypasses the "
            "router's HTTP split: gRPC, direct node calls, versioned URLs) is above "
            "analysis.max_unrouted_share; recorded on the release and audited.",
        )

    @extend_schema(
        parameters=[ReleaseFilters, *PAGE_PARAMETERS],
        responses={200: ReleaseSerializer(many=True)},
    )
    def get(self, request):
        releases = selectors.release_list_filtered(**list_filters(request, ReleaseFilters))
        return paginated(request, releases, ReleaseSerializer)

    class DryRunSerializer(serializers.Serializer):
        dry_run = serializers.BooleanField()
        cluster = serializers.CharField(source="cluster.name")
        model = serializers.CharField(source="model.name")
        baseline_version = serializers.IntegerField(source="baseline.version")
        candidate_version = serializers.IntegerField(source="candidate.version")
        candidate_served_as = serializers.SerializerMethodField(help_text="as on a started release")
        strategy = serializers.CharField()
        steps = serializers.JSONField()
        sla = serializers.JSONField()
        unrouted_at_start = UnroutedAtStartSerializer(allow_null=True)
        warnings = serializers.ListField(child=serializers.CharField())

        def get_candidate_served_as(self, obj) -> str:
            return obj.candidate_name or obj.model.name

    @extend_schema(
        request=InputSerializer,
        responses={
            201: ReleaseSerializer,
            200: OpenApiResponse(
                DryRunSerializer, description="dry_run: every check passed; nothing started."
            ),
        },
    )
    @idempotent
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = dict(data.validated_data)
        cluster = TritonCluster.objects.filter(name=body.pop("cluster")).first()
        model, number = body.pop("model"), body.pop("candidate_version")
        candidate = model_version_find(model_name=model, version=number)
        if cluster is None:
            raise NotFound(f"No cluster named '{request.data.get('cluster')}'.", field="cluster")
        if candidate is None:
            message = f"Model '{model}' has no version {number}."
            raise NotFound(message, field="candidate_version")
        release = services.release_create(
            cluster=cluster, candidate=candidate, actor=request.user, **body
        )
        if body["dry_run"]:
            release.dry_run = True
            release.unrouted_at_start = release.unrouted_at_start or None
            return Response(self.DryRunSerializer(release).data)
        created = selectors.release_get(release_id=release.pk, with_events=False)
        return Response(ReleaseSerializer(created).data, status=status.HTTP_201_CREATED)


class ReleaseDetailApi(APIView):
    """GET /api/v1/releases/{id}/[?wait=s]: state, weights, analyses and events."""

    @extend_schema(parameters=[WAIT_PARAMETER], responses={200: ReleaseDetailSerializer})
    def get(self, request, release_id):
        release = selectors.release_get(release_id=release_id, with_events=False)
        if release is None:
            raise Http404(f"No release {release_id}.")
        return Response(ReleaseDetailSerializer(release).data)


def _release_finished(*, release_id: int) -> bool:
    found = selectors.release_get(release_id=release_id, with_events=False)
    return found is None or RELEASE.finished(found)


release_detail = long_poll(
    ReleaseDetailApi,
    # Woken by saves outside the tick and by every tick's publish (releases/events.py).
    groups=lambda release_id: [group_name("release", release_id)],
    finished=_release_finished,
)


class ReleaseEventsApi(APIView):
    """GET /api/v1/releases/{id}/events/: the release's whole event log, oldest first, paged."""

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: EventSerializer(many=True)})
    def get(self, request, release_id):
        release = selectors.release_get(release_id=release_id, with_events=False)
        if release is None:
            raise Http404(f"No release {release_id}.")
        return paginated(request, selectors.release_events(release=release), EventSerializer)


class ReleaseActionApi(APIView):
    """POST /api/v1/releases/{id}/actions/ {"action","reason"} -> 200; 409 when it does not fit."""

    permission_classes = [ReleaseManagersWrite]

    class InputSerializer(inputs.InputSerializer):
        action = serializers.ChoiceField(
            choices=["approve", "pause", "resume", "rollback", "promote"]
        )
        reason = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(request=InputSerializer, responses={200: ReleaseSerializer})
    def post(self, request, release_id):
        release = selectors.release_get(release_id=release_id)
        if release is None:
            raise Http404(f"No release {release_id}.")
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.release_action(release=release, actor=request.user, **data.validated_data)
        return Response(ReleaseSerializer(selectors.release_get(release_id=release_id)).data)


class RouterNodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    routed = serializers.BooleanField()
    why = serializers.CharField(help_text="Why the router does not send to it; '' when it does.")
    unusable = serializers.BooleanField(
        help_text="The router cannot send to its address at all (left out, never stopping it)."
    )


class RouterSplitSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    percent = serializers.FloatField()


class RouterRouteSerializer(serializers.Serializer):
    model = serializers.CharField()
    split = RouterSplitSerializer(many=True)


class RouterViewSerializer(serializers.Serializer):
    driver = serializers.CharField()
    listen = serializers.CharField()
    grpc_listen = serializers.CharField(
        required=False,
        help_text="The gRPC pass-through listener ('' for none): gRPC is never split by version.",
    )
    running = serializers.BooleanField()
    nodes = RouterNodeSerializer(many=True)
    routes = RouterRouteSerializer(many=True)
    refused_requests = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Requests the router refused itself over the last refused_window_s (not "
        "inference: repository, shared memory, trace, logging, statistics, config, unknown "
        "paths or methods); null when its access log is not readable here.",
    )
    refused_window_s = serializers.FloatField(required=False)
    error = serializers.CharField(
        required=False, help_text="Set when the cluster's stored router settings do not parse."
    )


class ClusterRouterApi(APIView):
    """GET /api/v1/clusters/{name}/router/: what the cluster's router does now (driver,
    whether it runs, the nodes it sends to, each route's split, the requests it refused as
    not inference), read from the router and its access log."""

    @extend_schema(responses={200: RouterViewSerializer})
    def get(self, request, name):
        cluster = cluster_get(name=name)
        if cluster is None:
            raise Http404(f"No cluster named '{name}'.")
        return Response(RouterViewSerializer(selectors.router_view(cluster=cluster)).data)
