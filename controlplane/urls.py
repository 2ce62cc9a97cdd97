"""URL map: the console pages, the REST API under /api/v1/, the schema and its page, health."""

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from console.health_views import healthz
from controlplane.openapi import api_not_found
from controlplane.schema_view import SchemaView
from observability.views import metrics

api_v1 = [
    path("", include("accounts.urls_api")),
    path("", include("models_registry.urls_api")),
    path("", include("deployments.urls_api")),
    path("", include("benchmarks.urls_api")),
    path("", include("releases.urls_api")),
    path("", include("plans.urls_api")),
    path("", include("health.urls_api")),
    path("", include("telemetry.urls_api")),
    path("", include("reports.urls_api")),
    path("", include("notifications.urls_api")),
]

handler404 = "controlplane.openapi.handler404"
handler500 = "controlplane.outages.handler500"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    # The interactive API reference (Swagger UI, served from this server's static files).
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    # Every other path under /api/ is the API's JSON 404, with DEBUG on too.
    re_path(r"^api/", api_not_found),
    path("", include("accounts.urls")),
    path("", include("console.urls")),
]
