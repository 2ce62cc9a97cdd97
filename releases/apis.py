"""Releases REST resources (API.md, Releases)."""

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.errors import errors_response
from accounts.permissions import ReleaseManagersWrite
from deployments.models import TritonCluster
from deployments.selectors import cluster_get
from models_registry.selectors import model_version_find
from releases import selectors, services
from releases.services import ReleaseError


def _refused(exc: ReleaseError) -> Response:
    return errors_response(exc.message, field=exc.field, status=exc.status)


class EventSerializer(serializers.Serializer):
    kind = serializers.CharField()
    phase = serializers.CharField()
    message = serializers.CharField()
    data = serializers.JSONField()
    actor = serializers.CharField()
    created_at = serializers.DateTimeField()


class ReleaseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    cluster = serializers.CharField(source="cluster.name")
    model = serializers.CharField(source="model.name")
    baseline_version = serializers.IntegerField(source="baseline.version")
    candidate_version = serializers.IntegerField(source="candidate.version")
    strategy = serializers.CharField()
    steps = serializers.JSONField()
    step_interval_s = serializers.FloatField()
    analysis = serializers.JSONField()
    sticky_header = serializers.CharField()
    state = serializers.CharField(source="phase")
    step_index = serializers.IntegerField()
    candidate_weight = serializers.FloatField()
    router_weight = serializers.FloatField(allow_null=True)
    failed_checks = serializers.IntegerField()
    inconclusive_checks = serializers.IntegerField()
    reason = serializers.CharField()
    pending_action = serializers.JSONField()
    last_analysis = serializers.JSONField()
    router_url = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_router_url(self, obj) -> str:
        return obj.cluster.router.get("url", "")


class ReleaseDetailSerializer(ReleaseSerializer):
    analyses = serializers.SerializerMethodField()
    events = EventSerializer(many=True)

    def get_analyses(self, obj) -> list:
        return [e.data for e in obj.events.all() if e.kind == "analysis"]


class ReleaseListCreateApi(APIView):
    """GET, POST /api/v1/releases/."""

    permission_classes = [ReleaseManagersWrite]

    class InputSerializer(serializers.Serializer):
        cluster = serializers.CharField()
        model = serializers.CharField()
        candidate_version = serializers.IntegerField(min_value=1)
        strategy = serializers.ChoiceField(choices=["canary", "blue_green"], default="canary")
        steps = serializers.ListField(child=serializers.FloatField(), required=False)
        step_interval_s = serializers.FloatField(min_value=1, default=30)
        analysis = serializers.DictField(required=False)
        manual_gates = serializers.ListField(child=serializers.FloatField(), required=False)
        sticky_header = serializers.CharField(required=False, allow_blank=True, default="")
        progress_deadline_s = serializers.FloatField(min_value=10, default=600)
        require_benchmark = serializers.BooleanField(required=False, allow_null=True, default=None)

    @extend_schema(responses={200: ReleaseSerializer(many=True)})
    def get(self, request):
        return Response(ReleaseSerializer(selectors.release_list(), many=True).data)

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        state = serializers.CharField()

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = dict(data.validated_data)
        cluster = TritonCluster.objects.filter(name=body.pop("cluster")).first()
        model, number = body.pop("model"), body.pop("candidate_version")
        candidate = model_version_find(model_name=model, version=number)
        if cluster is None or candidate is None:
            field = "cluster" if cluster is None else "candidate_version"
            message = (
                "No such cluster."
                if cluster is None
                else f"Model '{model}' has no version {number}."
            )
            return Response({"errors": [{"field": field, "message": message}]}, status=400)
        try:
            release = services.release_create(
                cluster=cluster, candidate=candidate, actor=request.user, **body
            )
        except ReleaseError as exc:
            return _refused(exc)
        return Response({"id": release.pk, "state": release.phase}, status=status.HTTP_201_CREATED)


class ReleaseDetailApi(APIView):
    """GET /api/v1/releases/{id}/: state, weights, analyses and events."""

    @extend_schema(responses={200: ReleaseDetailSerializer})
    def get(self, request, release_id):
        release = selectors.release_get(release_id=release_id)
        if release is None:
            raise Http404(f"No release {release_id}.")
        return Response(ReleaseDetailSerializer(release).data)


class ReleaseActionApi(APIView):
    """POST /api/v1/releases/{id}/actions/ {"action","reason"} -> 200; 409 when it does not fit."""

    permission_classes = [ReleaseManagersWrite]

    class InputSerializer(serializers.Serializer):
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
        try:
            services.release_action(release=release, actor=request.user, **data.validated_data)
        except ReleaseError as exc:
            return _refused(exc)
        return Response(ReleaseSerializer(selectors.release_get(release_id=release_id)).data)


class RouterNodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    routed = serializers.BooleanField()


class RouterSplitSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    percent = serializers.FloatField()


class RouterRouteSerializer(serializers.Serializer):
    model = serializers.CharField()
    split = RouterSplitSerializer(many=True)


class RouterViewSerializer(serializers.Serializer):
    driver = serializers.CharField()
    listen = serializers.CharField()
    running = serializers.BooleanField()
    nodes = RouterNodeSerializer(many=True)
    routes = RouterRouteSerializer(many=True)


class ClusterRouterApi(APIView):
    """GET /api/v1/clusters/{name}/router/: what the cluster's router does now (driver,
    whether it runs, the nodes it sends to, each route's split), read from the router."""

    @extend_schema(responses={200: RouterViewSerializer})
    def get(self, request, name):
        cluster = cluster_get(name=name)
        if cluster is None:
            raise Http404(f"No cluster named '{name}'.")
        return Response(selectors.router_view(cluster=cluster))
