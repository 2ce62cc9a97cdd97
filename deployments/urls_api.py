from django.urls import path

from deployments import apis, freeze_apis

urlpatterns = [
    path("freezes/", freeze_apis.FreezeListCreateApi.as_view(), name="api-freezes"),
    path("freezes/<int:freeze_id>/", freeze_apis.FreezeDetailApi.as_view(), name="api-freeze"),
    path(
        "freeze-overrides/<int:override_id>/approve/",
        freeze_apis.FreezeOverrideApproveApi.as_view(),
        name="api-freeze-override-approve",
    ),
    path(
        "clusters/<str:name>/freeze/",
        freeze_apis.ClusterFreezeApi.as_view(),
        name="api-cluster-freeze",
    ),
    path(
        "clusters/<str:name>/freeze-overrides/",
        freeze_apis.FreezeOverrideCreateApi.as_view(),
        name="api-cluster-freeze-overrides",
    ),
    path("clusters/", apis.ClusterListCreateApi.as_view(), name="api-clusters"),
    path("clusters/<str:name>/", apis.ClusterDetailApi.as_view(), name="api-cluster"),
    path("clusters/<str:name>/nodes/", apis.NodeListCreateApi.as_view(), name="api-cluster-nodes"),
    path(
        "clusters/<str:name>/nodes/<str:node>/",
        apis.NodeDetailApi.as_view(),
        name="api-cluster-node",
    ),
    path("clusters/<str:name>/prices/", apis.PriceHistoryApi.as_view(), name="api-cluster-prices"),
    path("clusters/<str:name>/status/", apis.ClusterStatusApi.as_view(), name="api-cluster-status"),
    path(
        "clusters/<str:name>/models/<str:model>/unload/",
        apis.ModelUnloadApi.as_view(),
        name="api-cluster-model-unload",
    ),
    path("deployments/", apis.DeploymentCreateApi.as_view(), name="api-deployments"),
    path(
        "deployments/<int:deployment_id>/",
        apis.deployment_detail,
        name="api-deployment",
    ),
]
