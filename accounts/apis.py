"""Auth endpoints: tokens for scripts (create, list, revoke), websocket tickets, who-am-I."""

from django.contrib.auth import authenticate
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import inputs
from accounts.client_ip import ClientIpScopedThrottle
from accounts.errors import ErrorsSerializer, errors_response
from accounts.models import ApiToken
from accounts.roles import user_roles
from accounts.selectors import api_tokens_of
from accounts.services import (
    api_token_create,
    api_token_revoke,
    signin_failed,
    signin_refused,
    ws_ticket_create,
)
from accounts.signin_throttle import signin_ip_retry_after, signin_retry_after

BAD_CREDENTIALS = "Unable to sign in with the given username and password."


class ApiTokenSerializer(serializers.ModelSerializer):
    """A token as listed: never the secret, only its public prefix."""

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]


def too_many_attempts(retry_after: int) -> Response:
    message = f"Too many failed sign-ins. Try again in {retry_after} s."
    response = errors_response(message, status=status.HTTP_429_TOO_MANY_REQUESTS)
    response["Retry-After"] = str(retry_after)
    return response


class TokenCreateApi(APIView):
    """POST /api/v1/auth/token/ {"username","password","name"?} -> {"token","name","expires_at"}.

    Every call makes a new token (the secret is stored only as a digest).
    """

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [ClientIpScopedThrottle]
    throttle_scope = "auth"

    class InputSerializer(inputs.InputSerializer):
        class Meta:
            ref_name = "TokenCreateInput"

        username = serializers.CharField(max_length=150)
        password = serializers.CharField(
            style={"input_type": "password"}, trim_whitespace=False, max_length=4096
        )
        name = serializers.CharField(max_length=100, required=False, default="API")

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "TokenCreateOutput"

        token = serializers.CharField()
        name = serializers.CharField()
        expires_at = serializers.DateTimeField()

    @extend_schema(
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: ErrorsSerializer,
            401: OpenApiResponse(ErrorsSerializer, description="Wrong username or password."),
            429: ErrorsSerializer,
        },
    )
    def post(self, request):
        # Before the body is parsed: an IP past its failures costs no parsing or hashing.
        retry_after = signin_ip_retry_after(request)
        if retry_after is not None:
            signin_refused(request=request, username="", via="api")
            return too_many_attempts(retry_after)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        username, name = data.validated_data["username"], data.validated_data["name"]
        retry_after = signin_retry_after(request, username)
        if retry_after is not None:
            signin_refused(request=request, username=username, via="api")
            return too_many_attempts(retry_after)
        password = data.validated_data["password"]
        user = authenticate(request, username=username, password=password)
        if user is None or not user.is_active:
            signin_failed(request=request, username=username, via="api")
            response = errors_response(BAD_CREDENTIALS, status=status.HTTP_401_UNAUTHORIZED)
            response["WWW-Authenticate"] = 'Token realm="api"'
            return response
        token, secret = api_token_create(user=user, name=name)
        payload = {"token": secret, "name": token.name, "expires_at": token.expires_at}
        return Response(self.OutputSerializer(payload).data)


class TokenPagination(LimitOffsetPagination):
    default_limit = 100
    max_limit = 500


class TokenListApi(ListAPIView):
    """GET /api/v1/auth/tokens/: the caller's tokens, newest first (paginated)."""

    serializer_class = ApiTokenSerializer
    pagination_class = TokenPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return ApiToken.objects.none()
        return api_tokens_of(user=self.request.user)


class TokenRevokeApi(APIView):
    """DELETE /api/v1/auth/tokens/{id}/: revoke one of the caller's tokens at once (204)."""

    @extend_schema(responses={204: None, 404: ErrorsSerializer})
    def delete(self, request, token_id: int):
        token = get_object_or_404(api_tokens_of(user=request.user), pk=token_id)
        api_token_revoke(token=token, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WsTicketApi(APIView):
    """POST /api/v1/auth/ws-ticket/ -> {"ticket","expires_at"}: one websocket connect, ~60 s."""

    throttle_classes = [ClientIpScopedThrottle]
    throttle_scope = "ws-ticket"

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WsTicket"

        ticket = serializers.CharField()
        expires_at = serializers.DateTimeField()

    @extend_schema(request=None, responses={200: OutputSerializer, 429: ErrorsSerializer})
    def post(self, request):
        token = request.auth if isinstance(request.auth, ApiToken) else None
        ticket, expires_at = ws_ticket_create(user=request.user, token=token)
        return Response(self.OutputSerializer({"ticket": ticket, "expires_at": expires_at}).data)


class MeApi(APIView):
    """GET /api/v1/auth/me/: the signed-in user and their roles."""

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "Me"

        username = serializers.CharField()
        roles = serializers.ListField(child=serializers.CharField())
        is_superuser = serializers.BooleanField()

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request):
        user = request.user
        payload = {
            "username": user.get_username(),
            "roles": user_roles(user),
            "is_superuser": user.is_superuser,
        }
        return Response(self.OutputSerializer(payload).data)
