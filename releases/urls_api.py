from django.urls import path

from releases import apis

urlpatterns = [
    path("releases/", apis.ReleaseListCreateApi.as_view(), name="api-releases"),
    path("releases/<int:release_id>/", apis.release_detail, name="api-release"),
    path(
        "releases/<int:release_id>/events/",
        apis.ReleaseEventsApi.as_view(),
        name="api-release-events",
    ),
    path(
        "releases/<int:release_id>/actions/",
        apis.ReleaseActionApi.as_view(),
        name="api-release-actions",
    ),
    path("clusters/<str:name>/router/", apis.ClusterRouterApi.as_view(), name="api-cluster-router"),
]
