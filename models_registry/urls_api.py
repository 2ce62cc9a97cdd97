from django.urls import path

from models_registry import apis

urlpatterns = [
    path("teams/", apis.TeamListCreateApi.as_view(), name="api-teams"),
    path("teams/<str:name>/members/", apis.TeamMembersApi.as_view(), name="api-team-members"),
    path(
        "teams/<str:name>/members/<str:username>/",
        apis.TeamMemberApi.as_view(),
        name="api-team-member",
    ),
    path("models/", apis.ModelListCreateApi.as_view(), name="api-models"),
    path("models/<str:name>/", apis.ModelDetailApi.as_view(), name="api-model"),
    path(
        "models/<str:name>/versions/",
        apis.VersionListCreateApi.as_view(),
        name="api-model-versions",
    ),
    path(
        "models/<str:name>/versions/<int:version>/",
        apis.version_detail,
        name="api-model-version",
    ),
    path(
        "models/<str:name>/versions/<int:version>/derive/",
        apis.VersionDeriveApi.as_view(),
        name="api-model-version-derive",
    ),
    path(
        "models/<str:name>/versions/<int:version>/archive/",
        apis.VersionArchiveApi.as_view(),
        name="api-model-version-archive",
    ),
    path(
        "models/<str:name>/aliases/<str:alias>/", apis.AliasSetApi.as_view(), name="api-model-alias"
    ),
]
