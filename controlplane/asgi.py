"""ASGI entry point: HTTP through Django, websockets through Channels with auth."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from accounts.ws_auth import TicketOrSessionAuthMiddlewareStack  # noqa: E402
from controlplane.body_limit import BodyLimitMiddleware  # noqa: E402
from controlplane.outages import WebsocketOutageGuard  # noqa: E402
from controlplane.ws_routes import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodyLimitMiddleware(django_asgi_app),
        "websocket": WebsocketOutageGuard(
            AllowedHostsOriginValidator(
                TicketOrSessionAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            )
        ),
    }
)
