from django.urls import path

from console import (
    alert_views,
    audit_views,
    benchmark_views,
    cluster_views,
    freeze_views,
    list_views,
    plan_views,
    registry_views,
    release_views,
    report_views,
    telemetry_views,
    token_views,
    views,
    webhook_views,
)

app_name = "console"

urlpatterns = [
    path("", views.home, name="home"),
    path("health/panel/", views.health_panel, name="health-panel"),
    path("audit/", audit_views.audit_list, name="audit-list"),
    path("audit/export.csv", audit_views.audit_csv, name="audit-csv"),
    path("account/tokens/", token_views.token_list, name="token-list"),
    path("account/tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token-revoke"),
    path("models/", registry_views.model_list, name="model-list"),
    path("models/new/", registry_views.model_create, name="model-create"),
    path("models/<str:name>/", registry_views.model_detail, name="model-detail"),
    path("models/<str:name>/upload/", registry_views.model_upload, name="model-upload"),
    path(
        "models/<str:name>/members/add/",
        registry_views.team_member_add,
        name="team-member-add",
    ),
    path(
        "models/<str:name>/members/<str:username>/remove/",
        registry_views.team_member_remove,
        name="team-member-remove",
    ),
    path(
        "models/<str:name>/versions/<int:version>/",
        registry_views.version_detail,
        name="model-version",
    ),
    path(
        "models/<str:name>/versions/<int:version>/derive/",
        registry_views.version_derive,
        name="model-version-derive",
    ),
    path("clusters/", cluster_views.cluster_list, name="cluster-list"),
    path("deployments/", list_views.deployment_list, name="deployment-list"),
    path("benchmarks/", list_views.benchmark_list, name="benchmark-list"),
    path("clusters/<str:name>/", cluster_views.cluster_detail, name="cluster-detail"),
    path("clusters/<str:name>/deploy/", cluster_views.cluster_deploy, name="cluster-deploy"),
    # Freezes and overrides (console/freeze_views.py).
    path("clusters/<str:name>/freezes/", freeze_views.freeze_create, name="freeze-create"),
    path(
        "clusters/<str:name>/freezes/<int:freeze_id>/delete/",
        freeze_views.freeze_delete,
        name="freeze-delete",
    ),
    path(
        "clusters/<str:name>/freeze-overrides/",
        freeze_views.override_request,
        name="freeze-override-request",
    ),
    path(
        "clusters/<str:name>/freeze-overrides/<int:override_id>/approve/",
        freeze_views.override_approve,
        name="freeze-override-approve",
    ),
    path(
        "clusters/<str:name>/nodes/<str:node>/remove/",
        cluster_views.cluster_node_remove,
        name="cluster-node-remove",
    ),
    path(
        "clusters/<str:name>/models/<str:model>/unload/",
        cluster_views.cluster_unload,
        name="cluster-unload",
    ),
    path(
        "deployments/<int:deployment_id>/",
        cluster_views.deployment_detail,
        name="deployment-detail",
    ),
    path(
        "deployments/<int:deployment_id>/progress/",
        cluster_views.deployment_progress,
        name="deployment-progress",
    ),
    path("clusters/<str:name>/live/", telemetry_views.cluster_live, name="cluster-live"),
    path("models/<str:name>/live/", telemetry_views.model_live, name="model-live"),
    path("reports/", report_views.cost_overview, name="report-cost"),
    path("models/<str:name>/cost/", report_views.model_cost, name="model-cost"),
]

# Benchmarks section of the version page (console/benchmark_views.py).
urlpatterns += [
    path(
        "models/<str:name>/versions/<int:version>/benchmarks/start/",
        benchmark_views.benchmark_start,
        name="benchmark-start",
    ),
    path(
        "models/<str:name>/versions/<int:version>/benchmarks/import/",
        benchmark_views.benchmark_import,
        name="benchmark-import",
    ),
    path(
        "benchmarks/<int:run_id>/progress/",
        benchmark_views.benchmark_progress,
        name="benchmark-progress",
    ),
    path(
        "benchmarks/<int:run_id>/cancel/",
        benchmark_views.benchmark_cancel,
        name="benchmark-cancel",
    ),
]

# Release plans (console/plan_views.py).
urlpatterns += [
    path("plans/", plan_views.plan_list, name="plan-list"),
    path("plans/start/", plan_views.plan_start, name="plan-start"),
    path("plans/<int:plan_id>/", plan_views.plan_detail, name="plan-detail"),
    path("plans/<int:plan_id>/grid/", plan_views.plan_grid, name="plan-grid"),
    path("plans/<int:plan_id>/act/", plan_views.plan_act, name="plan-act"),
    path("plans/<int:plan_id>/approve/", plan_views.plan_approve_link, name="plan-approve-link"),
]
# Releases (console/release_views.py).
urlpatterns += [
    path("releases/", release_views.release_list, name="release-list"),
    path("releases/start/", release_views.release_start, name="release-start"),
    path("releases/<int:release_id>/", release_views.release_detail, name="release-detail"),
    path("releases/<int:release_id>/live/", release_views.release_live, name="release-live"),
    path("releases/<int:release_id>/act/", release_views.release_act, name="release-act"),
]

# Webhooks (console/webhook_views.py).
urlpatterns += [
    path("webhooks/", webhook_views.webhook_list, name="webhook-list"),
    path("webhooks/<int:webhook_id>/", webhook_views.webhook_detail, name="webhook-detail"),
    path("webhooks/<int:webhook_id>/toggle/", webhook_views.webhook_toggle, name="webhook-toggle"),
    path("webhooks/<int:webhook_id>/remove/", webhook_views.webhook_remove, name="webhook-remove"),
]
# Alerts and node pages (console/alert_views.py).
urlpatterns += [
    path("alerts/", alert_views.alert_list, name="alert-list"),
    path("alerts/<int:alert_id>/ack/", alert_views.alert_ack, name="alert-ack"),
    path("clusters/<str:name>/nodes/<str:node>/", alert_views.node_detail, name="cluster-node"),
]
