"""The home page's three views, one per role, each answering its role's first question
in one screen (read through the apps' selectors; the view picks which one to show)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from accounts.roles import Role
from benchmarks import selectors as benchmark_selectors
from core.shared import shared_value
from deployments import selectors as deployment_selectors
from health import selectors as health_selectors
from models_registry import selectors as registry_selectors
from releases import selectors as release_selectors
from reports import selectors as report_selectors

TABS = {
    "releases": ("Release managers", "Clusters, releases, drift and alerts"),
    "models": ("Algorithm team", "Your models: checks, benchmarks, where they serve"),
    "costs": ("Managers", "This month's cost, its change, top models and ghosts"),
}
TAB_OF_ROLE = {
    Role.RELEASE_MANAGERS.value: "releases",
    Role.ALGORITHM.value: "models",
    Role.MANAGERS.value: "costs",
}
DRIFT_WINDOW = timedelta(hours=1)


def default_tab(roles: list[str]) -> str:
    """The tab of the user's first role (superusers hold all: release managers first)."""
    for role in (Role.RELEASE_MANAGERS.value, Role.ALGORITHM.value, Role.MANAGERS.value):
        if role in roles:
            return TAB_OF_ROLE[role]
    return "releases"


def firing_alerts() -> list[dict]:
    """The ten newest firing alerts (health/), as the home shows them."""
    return [
        {
            "severity": a.severity,
            "get_kind_display": a.get_kind_display(),
            "cluster_name": a.cluster_name,
            "node_name": a.node_name,
            "model_name": a.model_name,
            "version": a.version,
            "summary": a.summary,
            "started_at": a.started_at.isoformat(),
        }
        for a in health_selectors.alert_list(state="firing")[:10]
    ]


def _cluster_card(entry: dict) -> dict:
    nodes = [
        {"name": n.name, "health": n.health, "last_error": n.last_error} for n in entry["nodes"]
    ]
    drift = [
        {
            "get_kind_display": d.get_kind_display(),
            "model_name": d.model_name,
            "node_name": d.node_name,
        }
        for d in entry["drift"]
    ]
    cluster = entry["cluster"]
    return {
        **entry,
        "cluster": {"name": cluster.name, "environment": cluster.environment},
        "nodes": nodes,
        "drift": drift,
    }


def _running_row(release) -> dict:
    return {
        "pk": release.pk,
        "model": {"name": release.model.name},
        "baseline": {"version": release.baseline.version},
        "candidate": {"version": release.candidate.version},
        "cluster": {"name": release.cluster.name},
        "phase": release.phase,
        "serving_weight": release.serving_weight,
        "next_check_at": release.next_check_at,
        "reason": release.reason,
    }


def _releases_now() -> dict:
    overview = deployment_selectors.fleet_overview(drift_since=timezone.now() - DRIFT_WINDOW)
    return {
        "clusters": [_cluster_card(entry) for entry in overview],
        "running": [_running_row(r) for r in release_selectors.release_running_list()],
        "alerts": firing_alerts(),
    }


def releases_view() -> dict:
    """Every cluster with node health and serving versions, running releases (phase, weight,
    next check), drift in the last hour, firing alerts: the same for every release manager,
    so read at most SWITCHYARD_PAGE_SHARE_S ago, once for all of them (core/shared.py)."""
    view = shared_value(
        "console:home:releases", _releases_now, fresh_s=settings.SWITCHYARD_PAGE_SHARE_S
    )
    for alert in view["alerts"]:
        alert["started_at"] = datetime.fromisoformat(alert["started_at"])
    return view


def _model_row(model, where: dict[str, list[dict]]) -> dict:
    versions = list(model.versions.all())
    latest = versions[0] if versions else None
    benchmark = benchmark_selectors.latest_finished(version=latest) if latest else None
    validation = (latest.validation or {}) if latest else {}
    return {
        "model": model,
        "latest": latest,
        "errors": len(validation.get("errors") or []),
        "warnings": len(validation.get("warnings") or []),
        "smoke": validation.get("smoke") or {},
        "benchmark": benchmark,
        "where": where.get(model.name, []),
    }


def models_view(user) -> dict:
    """The user's teams' models (every model for someone in no team), each with its latest
    version's validation, smoke and benchmark verdicts and what serves where."""
    models = list(registry_selectors.models_with_versions(member=user))
    mine = bool(models)
    if not mine:
        models = list(registry_selectors.models_with_versions()[:30])
    where = {m.name: deployment_selectors.model_live_where(model=m) for m in models}
    return {"mine": mine, "rows": [_model_row(m, where) for m in models]}


def costs_view(user) -> dict:
    """This month's cost and its change, the top models by cost, the ghosts: the rows this
    user may read, like the cost API (none without a reports role)."""
    readable = report_selectors.may_read_reports(user)
    models = report_selectors.visible_models(user) if readable else set()
    return {"month": month_overview_shared(models)}


def month_overview_shared(models: set[str] | None) -> dict:
    """reports' month_overview at most SWITCHYARD_HOME_CACHE_S old, computed once for every
    user who reads the same models (core/shared.py): most of a manager home's cost."""
    scope = "all" if models is None else json.dumps(sorted(models))
    key = f"console:home:month:{hashlib.sha256(scope.encode()).hexdigest()[:32]}"

    def compute() -> dict:
        # JSON for the cache: Decimals as their text (rendered alike), datetimes ISO.
        overview = report_selectors.month_overview(models=models)
        return json.loads(json.dumps(overview, cls=DjangoJSONEncoder))

    month = shared_value(key, compute, fresh_s=settings.SWITCHYARD_HOME_CACHE_S)
    return month | {"from": datetime.fromisoformat(month["from"])}


def view_for(tab: str, user) -> dict:
    if tab == "models":
        return models_view(user)
    if tab == "costs":
        return costs_view(user)
    return releases_view()
