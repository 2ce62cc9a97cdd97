"""Webhooks REST resources (release managers only, reads included: a webhook's URL and its
delivery log are operational detail). The secret is write-only."""

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import inputs
from accounts.errors import errors_response
from accounts.idempotency import idempotent
from accounts.pagination import PAGE_PARAMETERS, paginated
from accounts.roles import Role, user_has_role
from notifications import selectors, services
from notifications.catalog import EVENTS, FORMATS, SEVERITIES
from notifications.models import Delivery


class ReleaseManagersOnly(BasePermission):
    message = "Webhooks need the release-managers role."

    def has_permission(self, request, view) -> bool:
        return user_has_role(request.user, Role.RELEASE_MANAGERS.value)


class WebhookSerializer(inputs.InputSerializer):
    id = serializers.IntegerField(read_only=True)
    url = serializers.CharField(max_length=300, help_text="http(s) URL the events are POSTed to")
    secret = serializers.CharField(
        write_only=True, min_length=16, max_length=200, help_text="HMAC key; never returned"
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENTS), allow_empty=False, max_length=len(EVENTS)
    )
    min_severity = serializers.ChoiceField(choices=SEVERITIES, default=SEVERITIES[0])
    format = serializers.ChoiceField(
        choices=FORMATS, default=FORMATS[0], help_text='"slack": {"text": ...} (Slack, Teams)'
    )
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    is_active = serializers.BooleanField(required=False, default=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True, default="")
    created_at = serializers.DateTimeField(read_only=True)


class DeliverySerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="uuid", read_only=True)
    # Plain text here: the events' enum is documented once, on the webhook's `events`.
    event = serializers.CharField(read_only=True, help_text="one of the webhook's events")

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event",
            "severity",
            "status",
            "attempts",
            "last_error",
            "response_code",
            "next_attempt_at",
            "created_at",
            "delivered_at",
            "payload",
        ]


class DeliveryFilters(inputs.ChoicesListed):
    status = serializers.ChoiceField(choices=Delivery.Status.values, required=False)


def _webhook_or_404(webhook_id: int):
    hook = selectors.webhook_get(webhook_id=webhook_id)
    if hook is None:
        raise Http404(f"No webhook {webhook_id}.")
    return hook


def _refused(exc: services.WebhookError) -> Response:
    return errors_response(exc.message, field=exc.field, status=exc.status)


class WebhookListCreateApi(APIView):
    """GET, POST /api/v1/webhooks/."""

    permission_classes = [ReleaseManagersOnly]

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: WebhookSerializer(many=True)})
    def get(self, request):
        return paginated(request, selectors.webhook_list(), WebhookSerializer)

    @extend_schema(request=WebhookSerializer, responses={201: WebhookSerializer})
    @idempotent
    def post(self, request):
        data = WebhookSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            hook = services.webhook_create(actor=request.user, **data.validated_data)
        except services.WebhookError as exc:
            return _refused(exc)
        return Response(WebhookSerializer(hook).data, status=status.HTTP_201_CREATED)


class WebhookDetailApi(APIView):
    """GET, PATCH, DELETE /api/v1/webhooks/{id}/."""

    permission_classes = [ReleaseManagersOnly]

    @extend_schema(responses={200: WebhookSerializer})
    def get(self, request, webhook_id: int):
        return Response(WebhookSerializer(_webhook_or_404(webhook_id)).data)

    @extend_schema(request=WebhookSerializer, responses={200: WebhookSerializer})
    def patch(self, request, webhook_id: int):
        hook = _webhook_or_404(webhook_id)
        data = WebhookSerializer(hook, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        try:
            hook = services.webhook_update(webhook=hook, actor=request.user, **data.validated_data)
        except services.WebhookError as exc:
            return _refused(exc)
        return Response(WebhookSerializer(hook).data)

    @extend_schema(responses={204: None})
    def delete(self, request, webhook_id: int):
        try:
            services.webhook_delete(webhook=_webhook_or_404(webhook_id), actor=request.user)
        except services.WebhookError as exc:
            return _refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveryListApi(APIView):
    """GET /api/v1/webhooks/{id}/deliveries/?status=: the delivery log, newest first."""

    permission_classes = [ReleaseManagersOnly]

    @extend_schema(
        parameters=[*PAGE_PARAMETERS, DeliveryFilters],
        responses={200: DeliverySerializer(many=True)},
    )
    def get(self, request, webhook_id: int):
        hook = _webhook_or_404(webhook_id)
        filters = DeliveryFilters(data=request.query_params)
        filters.is_valid(raise_exception=True)
        qs = selectors.deliveries_of(webhook=hook, status=filters.validated_data.get("status"))
        return paginated(request, qs, DeliverySerializer)
