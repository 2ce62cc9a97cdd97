"""The Reports page: cost overview chart, cost table, ghost list (reports' selectors)."""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import render
from django.utils import timezone

from accounts.roles import Role, user_has_role
from console.paging import paged
from models_registry.models import Model
from reports import figures, selectors
from reports.services import floor_month

RANGES = {
    "3h": ("Last 3 hours", timedelta(hours=3)),
    "24h": ("Last 24 hours", timedelta(hours=24)),
    "7d": ("Last 7 days", timedelta(days=7)),
    "month": ("This month", None),
}
CHART_GROUPS = {"team": "Team", "model": "Model"}
# What a node's time was for (deployments.temporary): "" shows every kind.
COST_KINDS = {
    "": "All kinds",
    "serving": "Serving",
    "validation": "Validation (smoke tests)",
    "benchmark": "Benchmarks",
}
TABLE_GROUPS = {
    "model": "Model",
    "version": "Version",
    "team": "Team",
    "cluster": "Cluster",
    "node": "Node",
}


def _range(key: str):
    now = timezone.now()
    span = RANGES[key][1]
    if span is None:
        return floor_month(now), now
    return now - span, now


def _choice(request, name: str, choices, default: str) -> str:
    value = request.GET.get(name, default)
    return value if value in choices else default


def _readable(request) -> set[str] | None:
    """The models this user's cost pages show (None: all), scoped like the cost API; 403 for
    a user without a reports role."""
    if not selectors.may_read_reports(request.user):
        raise PermissionDenied("Reports need the managers, release-managers or algorithm role.")
    return selectors.visible_models(request.user)


@login_required
def cost_overview(request):
    """Managers and release managers read every row; the algorithm team its teams' rows."""
    models = _readable(request)
    range_key = _choice(request, "range", RANGES, "24h")
    chart_by = _choice(request, "chart", CHART_GROUPS, "team")
    table_by = _choice(request, "group_by", TABLE_GROUPS, "model")
    kind = _choice(request, "kind", COST_KINDS, "")
    since, until = _range(range_key)
    since, until = selectors.clip_range(since, until)
    report = selectors.cost_report(
        since=since, until=until, group_by=table_by, models=models, kind=kind or None
    )
    keys = selectors.GROUP_KEYS[table_by]
    # One page of the rows (costliest first), like GET /api/v1/reports/cost/'s group_by.
    values = {"range": range_key, "chart": chart_by, "group_by": table_by, "kind": kind}
    listed = paged(request, report["rows"], values=values)
    for row in listed["page"].object_list:
        row["keys_list"] = [row[k] for k in keys]
        row["share_pct"] = round(row["share"] * 100, 2)
    series = figures.cost_series(
        since=since, until=until, group_by=chart_by, models=models, kind=kind or None
    )
    ghosts = selectors.ghosts_visible(user=request.user, days=7)
    context = {
        "report": report,
        "rows": listed["page"].object_list,
        "pager": listed["pager"],
        "figure": figures.overview_figure(series, currency=settings.SWITCHYARD_CURRENCY),
        "ghosts": ghosts["rows"],
        "idle_on_nodes": ghosts["idle_on_nodes"],
        "budgets": selectors.budgets_visible(user=request.user),
        "ranges": {k: v[0] for k, v in RANGES.items()},
        "chart_groups": CHART_GROUPS,
        "table_groups": TABLE_GROUPS,
        "cost_kinds": COST_KINDS,
        "kind": kind,
        "kind_label": COST_KINDS[kind],
        "range_key": range_key,
        "chart_by": chart_by,
        "table_by": table_by,
        "group_keys": keys,
        "can_unload": user_has_role(request.user, Role.RELEASE_MANAGERS.value),
    }
    return render(request, "console/reports/overview.html", context)


@login_required
def model_cost(request, name: str):
    """The model's Cost tab: its cost per version and per cluster, and over time."""
    models = _readable(request)
    model = Model.objects.filter(name=name).first()
    if model is None or (models is not None and model.name not in models):
        raise Http404(f"No model named '{name}'.")
    range_key = _choice(request, "range", RANGES, "7d")
    since, until = selectors.clip_range(*_range(range_key))
    only = {model.name}
    by_version = selectors.cost_report(since=since, until=until, group_by="version", models=only)
    by_node = selectors.cost_report(since=since, until=until, group_by="node", models=only)
    series = figures.cost_series(since=since, until=until, group_by="version", models=only)
    context = {
        "model": model,
        "by_version": by_version,
        # A generative model's versions count their output tokens: cost per 1k of them too.
        "tokens": any(r["output_tokens"] for r in by_version["rows"]),
        "by_node": [r for r in by_node["rows"] if r["cost"] or r["requests"]],
        "figure": figures.overview_figure(series, currency=settings.SWITCHYARD_CURRENCY),
        "ranges": {k: v[0] for k, v in RANGES.items()},
        "range_key": range_key,
        "graph": selectors.graph_cost(model=model, since=since, until=until),
    }
    return render(request, "console/reports/model_cost.html", context)


def release_cost_context(release) -> dict:
    """The release page's Cost card: baseline and candidate per 1k during the release and,
    once it succeeded, since (reports/selectors.py `release_costs`, shared by every reader)."""
    return {
        "release_cost": selectors.release_costs(release),
        "currency": settings.SWITCHYARD_CURRENCY,
    }
