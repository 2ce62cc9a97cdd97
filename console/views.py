"""Console pages: thin views that read through selectors and write through services."""

import contextlib

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.shortcuts import render
from redis import RedisError

from accounts.roles import user_roles
from audit.selectors import audit_events_recent
from console import home as home_views
from console.health import system_health

# The health card asks every Celery worker and waits the whole ping timeout (1 s) for
# replies: per page load that made the home the slowest page under many users
# (bench/dashboard_load.py). One answer is shared for a few seconds, in the shared cache.
HEALTH_CACHE_KEY, HEALTH_CACHE_S = "console:system-health", 5


def _system_health_shared() -> dict:
    """The shared answer, or a fresh one while the cache (Redis) is out of reach: the card
    is how the page says so."""
    try:
        health = cache.get(HEALTH_CACHE_KEY)
    except RedisError:
        return system_health()
    if health is None:
        health = system_health()
        with contextlib.suppress(RedisError):
            cache.set(HEALTH_CACHE_KEY, health, HEALTH_CACHE_S)
    return health


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
        "recent_events": audit_events_recent(limit=8),
        **home_views.view_for(tab, request.user),
    }
    return render(request, "console/home.html", context)


@login_required
def health_panel(request):
    """The health card alone, refreshed by htmx."""
    return render(request, "console/_health_panel.html", {"health": _system_health_shared()})
