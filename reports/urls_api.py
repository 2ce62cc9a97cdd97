from django.urls import path

from reports import apis

urlpatterns = [
    path("reports/cost/", apis.CostReportApi.as_view(), name="api-reports-cost"),
    path("reports/ghosts/", apis.GhostReportApi.as_view(), name="api-reports-ghosts"),
]
