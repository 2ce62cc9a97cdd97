"""/healthz for load balancers and people: JSON, 200 when healthy, 503 when not."""

from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from console.health import system_health


@never_cache
@require_GET
def healthz(request):
    health = system_health()
    return JsonResponse(health, status=200 if health["status"] == "ok" else 503)
