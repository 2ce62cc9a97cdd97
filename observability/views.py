"""GET /metrics: the control plane's own metrics for Prometheus.

Who may read it: a client presenting `Authorization: Bearer <SWITCHYARD_METRICS_TOKEN>`
(when that setting is not empty), or any client whose address lies in
SWITCHYARD_METRICS_ALLOWED_NETWORKS (default: loopback only). Behind a reverse proxy the
address is the client's as the proxy settings decide it (SWITCHYARD_CLIENT_IP_HEADER,
SWITCHYARD_PROXY_COUNT): a client coming through the proxy is never taken for the proxy
itself. The exposition holds names, phases and counts, never secrets, but fleet layout is
still nobody else's business.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from accounts.client_ip import client_ip
from observability.exposition import render


def _has_token(request: HttpRequest) -> bool:
    token = settings.SWITCHYARD_METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def _from_allowed_network(request: HttpRequest) -> bool:
    """The client's address (accounts/client_ip.py: behind a proxy the operator declared,
    the one it forwards, never the proxy's own) lies in the allowed networks."""
    try:
        address = ipaddress.ip_address(client_ip(request))
    except ValueError:
        return False
    networks = settings.SWITCHYARD_METRICS_ALLOWED_NETWORKS
    return any(address in ipaddress.ip_network(n, strict=False) for n in networks)


def is_allowed(request: HttpRequest) -> bool:
    """True for a valid bearer token or a client inside the allowed networks."""
    return _has_token(request) or _from_allowed_network(request)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not is_allowed(request):
        error = {"field": None, "message": "A valid metrics token is required."}
        response = JsonResponse({"errors": [error]}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(render(), content_type=CONTENT_TYPE_PLAIN_0_0_4)
