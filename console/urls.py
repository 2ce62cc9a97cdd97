from django.urls import path

from console import registry_views, views

app_name = "console"

urlpatterns = [
    path("", views.home, name="home"),
    path("health/panel/", views.health_panel, name="health-panel"),
    path("models/", registry_views.model_list, name="model-list"),
    path("models/new/", registry_views.model_create, name="model-create"),
    path("models/<str:name>/", registry_views.model_detail, name="model-detail"),
    path("models/<str:name>/upload/", registry_views.model_upload, name="model-upload"),
    path(
        "models/<str:name>/versions/<int:version>/",
        registry_views.version_detail,
        name="model-version",
    ),
]
