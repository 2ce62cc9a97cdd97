"""bench/api_scale.py only: the product's URLs plus bare DRF list views of the same tables
(a generic ListAPIView, a ModelSerializer, limit/offset paging, the same authentication and
server), the floor the product's lists are measured against."""

from django.urls import include, path
from rest_framework import generics, pagination, serializers

from models_registry.models import Model, ModelVersion


class _Page(pagination.LimitOffsetPagination):
    default_limit = 100
    max_limit = 1000


class _BareModel(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")

    class Meta:
        model = Model
        fields = ["id", "name", "team", "description", "tags", "created_at"]


class _BareVersion(serializers.ModelSerializer):
    model = serializers.CharField(source="model.name")

    class Meta:
        model = ModelVersion
        fields = ["id", "model", "version", "label", "status", "digest", "created_at"]


class BareModels(generics.ListAPIView):
    queryset = Model.objects.select_related("team").order_by("name")
    serializer_class = _BareModel
    pagination_class = _Page


class BareVersions(generics.ListAPIView):
    queryset = ModelVersion.objects.select_related("model").order_by("-id")
    serializer_class = _BareVersion
    pagination_class = _Page


urlpatterns = [
    path("bench/bare/models/", BareModels.as_view()),
    path("bench/bare/versions/", BareVersions.as_view()),
    path("", include("controlplane.urls")),
]
