from django.urls import path

from models_registry.apis import TeamListCreateApi

urlpatterns = [
    path("teams/", TeamListCreateApi.as_view(), name="api-teams"),
]
