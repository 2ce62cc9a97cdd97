from django.urls import path

from plans import apis

urlpatterns = [
    path("release-plans/", apis.PlanListCreateApi.as_view(), name="api-release-plans"),
    path("release-plans/<int:plan_id>/", apis.plan_detail, name="api-release-plan"),
    path(
        "release-plans/<int:plan_id>/actions/",
        apis.PlanActionApi.as_view(),
        name="api-release-plan-actions",
    ),
]
