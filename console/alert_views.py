"""Alerts pages: the list with filters, acknowledging, and a node's page (its alerts and the
leak watch's memory samples)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.roles import Role, user_has_role
from console.paging import paged
from deployments import selectors as deployment_selectors
from health import selectors
from health.leaks import MIB, REMEDY
from health.models import Alert
from health.services import AlertError, alert_acknowledge

STATES = ["firing", "acknowledged", "resolved", "all"]


def alerts_badge(request) -> dict:
    """Context processor: how many alerts fire unacknowledged (the menu's badge)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"alerts_firing": selectors.alerts_unacknowledged_count()}


def _filters(request) -> dict:
    get = request.GET
    state = get.get("state") if get.get("state") in STATES else "firing"
    kind = get.get("kind") if get.get("kind") in Alert.Kind.values else None
    severity = get.get("severity") if get.get("severity") in Alert.Severity.values else None
    names = {k: (get.get(k) or "").strip()[:128] or None for k in ("cluster", "node", "model")}
    return {"state": state, "kind": kind, "severity": severity, **names}


@login_required
def alert_list(request):
    filters = _filters(request)
    values = {k: v or "" for k, v in filters.items()}
    listed = paged(request, selectors.alert_list(**filters), values=values)
    context = {
        **listed,
        "alerts": listed["page"].object_list,
        "filters": filters,
        "states": STATES,
        "kinds": Alert.Kind.choices,
        "severities": Alert.Severity.values,
        "can_ack": user_has_role(request.user, Role.RELEASE_MANAGERS.value),
        "next": request.get_full_path(),
    }
    return render(request, "console/alerts/list.html", context)


@login_required
@require_POST
def alert_ack(request, alert_id: int):
    if not user_has_role(request.user, Role.RELEASE_MANAGERS.value):
        raise PermissionDenied("Acknowledging alerts needs the release-managers role.")
    try:
        alert = alert_acknowledge(alert_id=alert_id, actor=request.user)
        messages.success(request, f"Acknowledged: {alert.summary[:120]}")
    except AlertError as exc:
        messages.error(request, exc.message)
    target = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = ""
    return redirect(target or "console:alert-list")


@login_required
def node_detail(request, name: str, node: str):
    cluster = deployment_selectors.cluster_get(name=name)
    row = cluster.nodes.filter(name=node).first() if cluster is not None else None
    if row is None:
        raise Http404(f"No node named '{node}' in cluster '{name}'.")
    samples = selectors.memory_samples_of(node_id=row.pk, limit=40)
    context = {
        "cluster": cluster,
        "node": row,
        "samples": [_sample_row(s) for s in samples],
        "remedy": REMEDY,
        "leak_open": selectors.alerts_open_about(cluster=name, node=node)
        .filter(kind=Alert.Kind.LEAK_SUSPECTED)
        .exists(),
    }
    return render(request, "console/clusters/node.html", context)


def _mib(value) -> str:
    return "" if value is None else f"{value / MIB:,.0f}"


def _sample_row(s) -> dict:
    def change(before, after):
        return "" if before is None or after is None else f"{(after - before) / MIB:+,.1f}"

    return {
        "at": s.created_at,
        "operation": s.operation,
        "model": s.model_name,
        "host_after": _mib(s.after_host_bytes),
        "host_change": change(s.before_host_bytes, s.after_host_bytes),
        "rss_after": _mib(s.after_rss_bytes),
        "rss_change": change(s.before_rss_bytes, s.after_rss_bytes),
        "shm_after": _mib(s.after_shm_bytes),
        "shm_change": change(s.before_shm_bytes, s.after_shm_bytes),
        "ok": s.ok,
    }
