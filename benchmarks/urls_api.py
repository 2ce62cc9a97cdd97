from django.urls import path

from benchmarks import apis

urlpatterns = [
    path("benchmarks/", apis.BenchmarkCreateApi.as_view(), name="api-benchmarks"),
    path("benchmarks/<int:run_id>/", apis.benchmark_detail, name="api-benchmark"),
    path(
        "benchmarks/<int:run_id>/cancel/",
        apis.BenchmarkCancelApi.as_view(),
        name="api-benchmark-cancel",
    ),
    path(
        "models/<str:name>/versions/<int:version>/benchmarks/",
        apis.VersionBenchmarksApi.as_view(),
        name="api-version-benchmarks",
    ),
    path(
        "models/<str:name>/versions/<int:version>/benchmarks/import/",
        apis.BenchmarkImportApi.as_view(),
        name="api-version-benchmarks-import",
    ),
]
