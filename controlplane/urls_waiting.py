"""The URLconf of the requests that wait (`?wait=`).

The web sends them to Django's ASGI handler (controlplane/sync_http.py), whose requests
resolve here: ROOT_URLCONF's patterns, each long-poll view (accounts/waits.py `long_poll`)
replaced by its async twin, which parks on the channel layer without holding a thread. Every
other view, name, namespace and error handler is the root URLconf's own, so a request that
waits anywhere else is answered as it would be without the wait.
"""

from importlib import import_module

from django.conf import settings
from django.urls import URLPattern, URLResolver


def waiting_patterns(patterns) -> list:
    """`patterns` with every long-poll view replaced by its async twin, includes walked."""
    twins = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = waiting_patterns(entry.url_patterns)
            entry = URLResolver(
                entry.pattern, inner, entry.default_kwargs, entry.app_name, entry.namespace
            )
        elif (twin := getattr(entry.callback, "waiting", None)) is not None:
            entry = URLPattern(entry.pattern, twin, entry.default_args, entry.name)
        twins.append(entry)
    return twins


_root = import_module(settings.ROOT_URLCONF)
urlpatterns = waiting_patterns(_root.urlpatterns)
handler400 = getattr(_root, "handler400", "django.views.defaults.bad_request")
handler403 = getattr(_root, "handler403", "django.views.defaults.permission_denied")
handler404 = getattr(_root, "handler404", "django.views.defaults.page_not_found")
handler500 = getattr(_root, "handler500", "django.views.defaults.server_error")
