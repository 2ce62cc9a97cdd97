"""Freeze windows and emergency overrides over the API (docs/RELEASE_PLANS.md, Freezes)."""

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import inputs
from accounts.errors import NotFound
from accounts.pagination import PAGE_PARAMETERS, paginated
from accounts.permissions import ReleaseManagersWrite
from deployments import freezes
from deployments.models import FreezeOverride, FreezeWindow
from deployments.selectors import cluster_get


class FreezeWindowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    cluster = serializers.CharField(source="cluster.name", allow_null=True, default=None,
                                    help_text="null: every cluster")  # fmt: skip
    reason = serializers.CharField()
    timezone = serializers.CharField()
    starts_at = serializers.DateTimeField(allow_null=True)
    ends_at = serializers.DateTimeField(allow_null=True)
    weekdays = serializers.ListField(child=serializers.IntegerField(), help_text="0 = Monday")
    start = serializers.TimeField(allow_null=True)
    end = serializers.TimeField(allow_null=True)
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()


class FreezeOverrideSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    cluster = serializers.CharField(source="cluster.name")
    reason = serializers.CharField()
    hours = serializers.FloatField()
    requested_by = serializers.CharField(source="requested_by.username", allow_null=True,
                                         default=None)  # fmt: skip
    approved_by = serializers.CharField(source="approved_by.username", allow_null=True,
                                        default=None)  # fmt: skip
    approved_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)


class FreezeSpanSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    reason = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    now = serializers.BooleanField(help_text="holding now")
    fleet_wide = serializers.BooleanField()
    timezone = serializers.CharField()


class ClusterFreezeSerializer(serializers.Serializer):
    frozen = serializers.CharField(help_text="why nothing starts or advances now ('' if it may)")
    override = FreezeOverrideSerializer(allow_null=True)
    upcoming = FreezeSpanSerializer(many=True)


def _cluster(name: str):
    cluster = cluster_get(name=name)
    if cluster is None:
        raise NotFound(f"No cluster named '{name}'.", field="cluster")
    return cluster


class FreezeListCreateApi(APIView):
    """GET, POST /api/v1/freezes/."""

    permission_classes = [ReleaseManagersWrite]

    class InputSerializer(inputs.InputSerializer):
        cluster = serializers.CharField(
            required=False, allow_null=True, default=None,
            help_text="a cluster's name; absent: every cluster",
        )  # fmt: skip
        reason = serializers.CharField(max_length=freezes.MAX_REASON)
        timezone = serializers.CharField(max_length=64, default="UTC")
        starts_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
        ends_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
        weekdays = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=6),
                                         required=False, max_length=7, default=list)  # fmt: skip
        start = serializers.TimeField(required=False, allow_null=True, default=None)
        end = serializers.TimeField(required=False, allow_null=True, default=None)

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: FreezeWindowSerializer(many=True)})
    def get(self, request):
        rows = FreezeWindow.objects.select_related("cluster", "created_by").order_by("id")
        cluster = request.query_params.get("cluster")
        if cluster:
            rows = rows.filter(cluster__name=cluster) | rows.filter(cluster__isnull=True)
        return paginated(request, rows, FreezeWindowSerializer)

    @extend_schema(request=InputSerializer, responses={201: FreezeWindowSerializer})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        name = values.pop("cluster")
        row = freezes.freeze_window_create(
            actor=request.user, cluster=_cluster(name) if name else None,
            tz=values.pop("timezone"), **values,
        )  # fmt: skip
        return Response(FreezeWindowSerializer(row).data, status=status.HTTP_201_CREATED)


class FreezeDetailApi(APIView):
    """DELETE /api/v1/freezes/{id}/."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(responses={204: None})
    def delete(self, request, freeze_id):
        row = FreezeWindow.objects.filter(pk=freeze_id).select_related("cluster").first()
        if row is None:
            raise Http404(f"No freeze {freeze_id}.")
        freezes.freeze_window_delete(actor=request.user, window=row)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ClusterFreezeApi(APIView):
    """GET /api/v1/clusters/{name}/freeze/: frozen now or not, the override in force, what comes."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(responses={200: ClusterFreezeSerializer})
    def get(self, request, name):
        cluster = _cluster(name)
        answer = {
            "frozen": freezes.cluster_frozen(cluster.name),
            "override": freezes.override_in_force(cluster.name),
            "upcoming": freezes.cluster_freezes(cluster.name),
        }
        return Response(ClusterFreezeSerializer(answer).data)


class FreezeOverrideCreateApi(APIView):
    """POST /api/v1/clusters/{name}/freeze-overrides/ {"reason", "hours"}: asked, not yet in
    force (a second release manager approves)."""

    permission_classes = [ReleaseManagersWrite]

    class InputSerializer(inputs.InputSerializer):
        reason = serializers.CharField(max_length=2000)
        hours = serializers.FloatField(min_value=0.01, max_value=freezes.MAX_OVERRIDE_HOURS)

    @extend_schema(request=InputSerializer, responses={201: FreezeOverrideSerializer})
    def post(self, request, name):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row = freezes.freeze_override_request(actor=request.user, cluster=_cluster(name),
                                              **data.validated_data)  # fmt: skip
        return Response(FreezeOverrideSerializer(row).data, status=status.HTTP_201_CREATED)


class FreezeOverrideApproveApi(APIView):
    """POST /api/v1/freeze-overrides/{id}/approve/: in force from now, for its hours."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(request=None, responses={200: FreezeOverrideSerializer})
    def post(self, request, override_id):
        row = FreezeOverride.objects.filter(pk=override_id).first()
        if row is None:
            raise Http404(f"No freeze override {override_id}.")
        row = freezes.freeze_override_approve(actor=request.user, override=row)
        return Response(FreezeOverrideSerializer(row).data)
