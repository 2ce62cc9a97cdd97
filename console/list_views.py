"""Lists that had no page of their own: every deployment and every benchmark run, 50 a page,
filtered like GET /api/v1/deployments/ and GET /api/v1/benchmarks/ (model, cluster, state,
since)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from benchmarks import selectors as benchmark_selectors
from benchmarks.apis import BenchmarkFilters
from console.paging import api_filters, paged
from deployments import selectors as deployment_selectors
from deployments.apis import DeploymentFilters


def _listed(request, filter_class, selector) -> dict:
    filters, values, errors = api_filters(request, filter_class)
    listed = paged(request, selector(**filters), values=values)
    states = list(filter_class().fields["state"].choices)
    return {**listed, "values": values, "errors": errors, "states": states}


@login_required
def deployment_list(request):
    context = _listed(request, DeploymentFilters, deployment_selectors.deployment_list)
    return render(request, "console/clusters/deployment_list.html", context)


@login_required
def benchmark_list(request):
    context = _listed(request, BenchmarkFilters, benchmark_selectors.benchmark_list)
    return render(request, "console/benchmarks/list.html", context)
