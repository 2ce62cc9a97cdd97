"""/healthz for load balancers and people: JSON, 200 when healthy, 503 when not.

Anonymous callers get the status (and when it was checked) only; signed-in users also get
each check's detail (names, never URLs). Every caller is answered from a result at most
SWITCHYARD_HEALTH_CACHE_S old, so a flood of probes runs one check per window.
"""

from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from accounts.services import api_token_use
from console.health import system_health_shared


def _signed_in(request) -> bool:
    """A session user, or a script sending `Authorization: Token <token>`."""
    if request.user.is_authenticated:
        return True
    keyword, _, secret = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    token = api_token_use(secret=secret.strip()) if keyword == "Token" and secret else None
    return token is not None and token.user.is_active


@never_cache
@require_GET
def healthz(request):
    health = system_health_shared()
    status = 200 if health["status"] == "ok" else 503
    # Who is signed in is in the database: while it is down, everyone gets the status only.
    if not health["checks"]["database"]["is_ok"] or not _signed_in(request):
        brief = {"status": health["status"], "checked_at": health["checked_at"]}
        return JsonResponse(brief, status=status)
    return JsonResponse(health, status=status)
