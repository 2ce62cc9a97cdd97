"""PostgreSQL or Redis out of reach (restarting, failing over): every page and API call gets
a clean 503 with Retry-After instead of a traceback 500, and every websocket is closed with
4503 so the page reconnects; the web process itself never needs a restart.

* `OutageMiddleware` answers the errors a view raises (one warning line, no traceback);
* `handler500` answers the same errors raised in other middleware (a session saved at the
  end of a request), where no middleware can catch them, and is Django's 500 otherwise;
* `WebsocketOutageGuard` wraps the websocket app: a handshake that cannot reach the session
  store or the channel layer, and a socket whose channel layer is lost, end in a close.

API paths answer in the API's error shape; pages answer a small page that retries itself
and touches neither service.
"""

from __future__ import annotations

import logging
import sys

import redis
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.deprecation import MiddlewareMixin
from django.views import defaults

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5
# Websocket close code of an outage, in the 4xxx range this app uses like HTTP statuses
# (4401, 4404); daphne (autobahn) sends no close code but 1000 and 3000-4999, not 1013.
UNAVAILABLE = 4503
_MESSAGES = {
    "database": "The database (PostgreSQL) is unreachable right now; retry in a few seconds.",
    "redis": "Redis is unreachable right now; retry in a few seconds.",
}


def outage_of(exc: BaseException | None) -> str | None:
    """'database' or 'redis' when `exc` (or an error it was raised from) means the service is
    out of reach; None for any other error."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OperationalError | InterfaceError):
            return "database"
        if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
            return "redis"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def outage_response(request, service: str) -> HttpResponse:
    message = _MESSAGES[service]
    if request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
        response: HttpResponse = JsonResponse({"errors": [{"message": message}]}, status=503)
    else:
        page = render_to_string(
            "503.html",
            {"message": message, "retry_s": RETRY_AFTER_S, "reload": request.method == "GET"},
        )
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"
    return response


class OutageMiddleware(MiddlewareMixin):
    """A view that raised because PostgreSQL or Redis is out of reach answers 503."""

    def process_exception(self, request, exception):
        service = outage_of(exception)
        if service is None:
            return None
        log.warning("%s %s: %s unavailable: %s", request.method, request.path, service, exception)
        return outage_response(request, service)


def handler500(request):
    """Django's last resort: 503 for an outage raised outside a view, its 500 page otherwise."""
    service = outage_of(sys.exc_info()[1])
    if service is not None:
        return outage_response(request, service)
    return defaults.server_error(request)


class WebsocketOutageGuard:
    """Wraps the websocket app: an outage ends the socket with 4503 (before the handshake is
    accepted: a refused handshake), logged as one warning line; the page's script reconnects."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        try:
            return await self.app(scope, receive, send)
        except Exception as exc:
            service = outage_of(exc)
            if service is None:
                raise
            log.warning("websocket %s: %s unavailable: %s", scope.get("path"), service, exc)
            try:
                await send({"type": "websocket.close", "code": UNAVAILABLE})
            except Exception:  # noqa: S110 - the client is gone already
                pass
