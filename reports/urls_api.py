from django.urls import path

from reports import apis

urlpatterns = [
    path("reports/cost/", apis.CostReportApi.as_view(), name="api-reports-cost"),
    path("reports/ghosts/", apis.GhostReportApi.as_view(), name="api-reports-ghosts"),
    path("reports/budgets/", apis.BudgetsApi.as_view(), name="api-reports-budgets"),
    path("reports/budgets/<str:team>/", apis.BudgetSetApi.as_view(), name="api-reports-budget"),
]
