from django.urls import path

from telemetry import apis

urlpatterns = [
    path("metrics/", apis.MetricsApi.as_view(), name="api-metrics"),
]
