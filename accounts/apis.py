"""Auth endpoints: token for scripts, and who-am-I."""

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import user_roles
from audit.services import audit_record


class TokenCreateApi(APIView):
    """POST /api/v1/auth/token/ {"username","password"} -> {"token"}."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    class InputSerializer(serializers.Serializer):
        username = serializers.CharField()
        password = serializers.CharField(style={"input_type": "password"}, trim_whitespace=False)

    class OutputSerializer(serializers.Serializer):
        token = serializers.CharField()

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(request, **data.validated_data)
        if user is None or not user.is_active:
            message = "Unable to sign in with the given username and password."
            return Response({"errors": [{"message": message}]}, status=status.HTTP_400_BAD_REQUEST)
        token, created = Token.objects.get_or_create(user=user)
        if created:
            audit_record(actor=user, action="auth.token_created", obj=user)
        return Response(self.OutputSerializer({"token": token.key}).data)


class MeApi(APIView):
    """GET /api/v1/auth/me/: the signed-in user and their roles."""

    class OutputSerializer(serializers.Serializer):
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
