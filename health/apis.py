"""Alerts REST resources (API.md: GET /api/v1/alerts/, POST /api/v1/alerts/{id}/ack/)."""

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.inputs import ChoicesListed, InputSerializer
from accounts.pagination import PAGE_PARAMETERS, paginated
from accounts.permissions import ReleaseManagersWrite
from deployments.models import TritonCluster
from health import selectors, services
from health.models import Alert, ClusterHealth
from health.remediation import cluster_remediation_set


class AlertSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    severity = serializers.CharField()
    state = serializers.CharField()
    cluster = serializers.CharField(source="cluster_name")
    node = serializers.CharField(source="node_name")
    model = serializers.CharField(source="model_name")
    version = serializers.IntegerField(allow_null=True)
    summary = serializers.CharField()
    details = serializers.JSONField()
    started_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    acknowledged_by = serializers.SerializerMethodField()
    acknowledged_at = serializers.DateTimeField(allow_null=True)

    def get_acknowledged_by(self, alert: Alert) -> str | None:
        user = alert.acknowledged_by
        return user.get_username() if user is not None else None


class AlertFilters(ChoicesListed):
    state = serializers.ChoiceField(
        choices=["firing", "acknowledged", "resolved", "all"],
        default="all",
        help_text="firing: every open alert (acknowledged ones too)",
    )
    kind = serializers.ChoiceField(choices=Alert.Kind.values, required=False)
    severity = serializers.ChoiceField(choices=Alert.Severity.values, required=False)
    cluster = serializers.CharField(required=False, max_length=63)
    node = serializers.CharField(required=False, max_length=100)
    model = serializers.CharField(required=False, max_length=128)


class AlertListApi(APIView):
    """GET /api/v1/alerts/: everyone signed in reads alerts."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(
        parameters=[
            *PAGE_PARAMETERS,
            OpenApiParameter("state", str, enum=["firing", "acknowledged", "resolved", "all"]),
            OpenApiParameter("kind", str, enum=Alert.Kind.values),
            OpenApiParameter("severity", str, enum=Alert.Severity.values),
            OpenApiParameter("cluster", str),
            OpenApiParameter("node", str),
            OpenApiParameter("model", str),
        ],
        responses={200: AlertSerializer(many=True)},
    )
    def get(self, request):
        filters = AlertFilters(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return paginated(request, selectors.alert_list(**filters.validated_data), AlertSerializer)


class AlertDetailApi(APIView):
    """GET /api/v1/alerts/{id}/."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(responses={200: AlertSerializer})
    def get(self, request, alert_id: int):
        alert = selectors.alert_get(alert_id=alert_id)
        if alert is None:
            raise Http404("No such alert.")
        return Response(AlertSerializer(alert).data)


class AlertAckApi(APIView):
    """POST /api/v1/alerts/{id}/ack/: release managers acknowledge (they are on call)."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(request=None, responses={200: AlertSerializer})
    def post(self, request, alert_id: int):
        alert = services.alert_acknowledge(alert_id=alert_id, actor=request.user)
        return Response(AlertSerializer(selectors.alert_get(alert_id=alert.pk)).data)


class HealthSettingsSerializer(InputSerializer):
    remediation_enabled = serializers.BooleanField(
        help_text="reload a version whose probe fails while READY (at most once an hour)"
    )


class ClusterHealthSettingsApi(APIView):
    """GET, PUT /api/v1/clusters/{name}/health-settings/: release managers switch the
    automatic reload on or off (off by default)."""

    permission_classes = [ReleaseManagersWrite]

    def _cluster(self, name: str):
        cluster = TritonCluster.objects.filter(name=name).first()
        if cluster is None:
            raise Http404(f"No cluster named '{name}'.")
        return cluster

    @extend_schema(responses={200: HealthSettingsSerializer})
    def get(self, request, name: str):
        row = ClusterHealth.objects.filter(cluster=self._cluster(name)).first()
        return Response({"remediation_enabled": bool(row and row.remediation_enabled)})

    @extend_schema(request=HealthSettingsSerializer, responses={200: HealthSettingsSerializer})
    def put(self, request, name: str):
        data = HealthSettingsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row = cluster_remediation_set(
            cluster=self._cluster(name),
            enabled=data.validated_data["remediation_enabled"],
            actor=request.user,
        )
        return Response({"remediation_enabled": row.remediation_enabled})
