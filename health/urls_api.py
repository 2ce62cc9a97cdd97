from django.urls import path

from health import apis

urlpatterns = [
    path("alerts/", apis.AlertListApi.as_view(), name="api-alerts"),
    path("alerts/<int:alert_id>/", apis.AlertDetailApi.as_view(), name="api-alert"),
    path("alerts/<int:alert_id>/ack/", apis.AlertAckApi.as_view(), name="api-alert-ack"),
    path(
        "clusters/<str:name>/health-settings/",
        apis.ClusterHealthSettingsApi.as_view(),
        name="api-cluster-health-settings",
    ),
]
