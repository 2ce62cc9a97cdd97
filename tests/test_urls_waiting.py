"""controlplane/urls_waiting.py: the requests that wait resolve to the same views as the rest,
except each long-poll view (accounts/waits.py), which is its async twin there and a plain
sync view everywhere else (no event loop, no thread hop for a request without `wait`). The
waits themselves run on the real stack in tests/test_api_wait.py."""

from asgiref.sync import iscoroutinefunction
from django.urls import URLPattern, URLResolver, get_resolver

LONG_POLLS = [
    "/api/v1/releases/7/",
    "/api/v1/deployments/7/",
    "/api/v1/benchmarks/7/",
    "/api/v1/models/risk_score/versions/7/",
    "/api/v1/release-plans/7/",
]


def _flat(patterns, prefix=""):
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _flat(entry.url_patterns, route)
        else:
            assert isinstance(entry, URLPattern)
            yield route, entry.name, entry.callback


def test_long_polls_are_sync_views_except_where_requests_wait():
    root, waiting = get_resolver(), get_resolver("controlplane.urls_waiting")
    for path in LONG_POLLS:
        plain, twin = root.resolve(path), waiting.resolve(path)
        assert not iscoroutinefunction(plain.func), path
        assert iscoroutinefunction(twin.func), path
        assert twin.func is plain.func.waiting, path
        assert (twin.url_name, twin.kwargs, twin.namespaces) == (
            plain.url_name,
            plain.kwargs,
            plain.namespaces,
        )


def test_every_other_route_is_the_root_urlconfs_own():
    root = list(_flat(get_resolver().url_patterns))
    waiting = list(_flat(get_resolver("controlplane.urls_waiting").url_patterns))
    assert [(r, n) for r, n, _ in root] == [(r, n) for r, n, _ in waiting]
    swapped = [r for (r, _, a), (_, _, b) in zip(root, waiting, strict=True) if a is not b]
    assert len(swapped) == len(LONG_POLLS), swapped
    for (route, _, plain), (_, _, twin) in zip(root, waiting, strict=True):
        assert twin is plain or twin is plain.waiting, route
