"""Registry REST resources (API.md, Registry)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import AlgorithmWrites
from models_registry.selectors import team_list
from models_registry.services import RegistryError, team_create


class TeamOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    created_at = serializers.DateTimeField()


class TeamListCreateApi(APIView):
    """GET, POST /api/v1/teams/: everyone signed in reads; the algorithm team creates."""

    permission_classes = [AlgorithmWrites]

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100)

    @extend_schema(responses={200: TeamOutputSerializer(many=True)})
    def get(self, request):
        return Response(TeamOutputSerializer(team_list(), many=True).data)

    @extend_schema(request=InputSerializer, responses={201: TeamOutputSerializer})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            team = team_create(name=data.validated_data["name"], actor=request.user)
        except RegistryError as exc:
            return Response(
                {"errors": [{"field": exc.field, "message": exc.message}]},
                status=status.HTTP_400_BAD_REQUEST,
            )
        except DjangoValidationError as exc:
            errors = [{"field": f, "message": m} for f, ms in exc.message_dict.items() for m in ms]
            return Response({"errors": errors}, status=status.HTTP_400_BAD_REQUEST)
        return Response(TeamOutputSerializer(team).data, status=status.HTTP_201_CREATED)
