"""ASGI entry point: HTTP through Django, websockets through Channels with auth."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from accounts.ws_auth import TicketOrSessionAuthMiddlewareStack  # noqa: E402
from controlplane.body_limit import BodyLimitMiddleware  # noqa: E402
from controlplane.daphne_limits import install as install_daphne_limits  # noqa: E402
from controlplane.db_pool import ConnectionsGivenBack, publisher_start  # noqa: E402
from controlplane.outages import WebsocketOutageGuard  # noqa: E402
from controlplane.ws_routes import websocket_urlpatterns  # noqa: E402

# Under daphne the body limits apply as bytes arrive (daphne buffers a body before the app).
install_daphne_limits()
# This process's pool numbers, for /metrics whichever web process answers it.
publisher_start()

application = ProtocolTypeRouter(
    {
        "http": BodyLimitMiddleware(ConnectionsGivenBack(django_asgi_app)),
        "websocket": WebsocketOutageGuard(
            AllowedHostsOriginValidator(
                TicketOrSessionAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            )
        ),
    }
)
