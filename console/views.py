"""Console pages: thin views that read through selectors and write through services."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from accounts.roles import user_roles
from audit.selectors import audit_events_recent
from console.health import system_health


@login_required
def home(request):
    context = {
        "health": system_health(),
        "roles": user_roles(request.user),
        "recent_events": audit_events_recent(limit=10),
    }
    return render(request, "console/home.html", context)


@login_required
def health_panel(request):
    """The health card alone, refreshed by htmx."""
    return render(request, "console/_health_panel.html", {"health": system_health()})
