"""Console pages: thin views that read through selectors and write through services."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from accounts.roles import user_roles
from audit.selectors import audit_events_recent
from console import home as home_views
from console.audit_views import events_shown
from console.health import system_health_shared


def _system_health_shared() -> dict:
    """The health card's answer, shared for a few seconds (console/health.py): the card asks
    every Celery worker and waits up to the ping timeout (bench/dashboard_load.py)."""
    return system_health_shared()


@login_required
def home(request):
    """One home per role (tabs): each answers its role's first question; anyone may open
    the others' tab."""
    roles = user_roles(request.user)
    tab = request.GET.get("tab", "")
    if tab not in home_views.TABS:
        tab = home_views.default_tab(roles)
    context = {
        "health": _system_health_shared(),
        "roles": roles,
        "tab": tab,
        "tabs": home_views.TABS,
        "recent_events": events_shown(audit_events_recent(limit=8), request.user),
        **home_views.view_for(tab, request.user),
    }
    return render(request, "console/home.html", context)


@login_required
def health_panel(request):
    """The health card alone, refreshed by htmx."""
    return render(request, "console/_health_panel.html", {"health": _system_health_shared()})
