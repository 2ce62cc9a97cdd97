"""ASGI entry point: plain HTTP requests through Django's sync handler on a pool of threads
(controlplane/sync_http.py), long-polls through Django's ASGI handler (resolved in
controlplane/urls_waiting.py), websockets through Channels with auth."""

import gc
import os

from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
get_asgi_application()  # sets Django up; the requests that wait get a handler of their own

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from accounts.ws_auth import TicketOrSessionAuthMiddlewareStack  # noqa: E402
from controlplane.body_limit import BodyLimitMiddleware  # noqa: E402
from controlplane.daphne_limits import install as install_daphne_limits  # noqa: E402
from controlplane.db_pool import ConnectionsGivenBack, publisher_start  # noqa: E402
from controlplane.outages import WebsocketOutageGuard  # noqa: E402
from controlplane.sync_http import SyncHttp, WaitingHandler  # noqa: E402
from controlplane.ws_routes import websocket_urlpatterns  # noqa: E402

GC_YOUNG_THRESHOLD = 50_000

# Under daphne the body limits apply as bytes arrive (daphne buffers a body before the app).
install_daphne_limits()
# This process's pool numbers, for /metrics whichever web process answers it.
publisher_start()

application = ProtocolTypeRouter(
    {
        "http": BodyLimitMiddleware(
            SyncHttp(
                get_wsgi_application(),
                ConnectionsGivenBack(WaitingHandler()),
                threads=settings.SWITCHYARD_WEB_THREADS,
            )
        ),
        "websocket": WebsocketOutageGuard(
            AllowedHostsOriginValidator(
                TicketOrSessionAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            )
        ),
    }
)

# The cyclic garbage collector took about a third of a web process's CPU under load: an API
# list of 100 rows makes some 30,000 objects, every 700 of them started a collection, and the
# older generations' collections walked the startup's 240,000 objects too. What startup
# made lives as long as the process, so it is moved out of the collector's reach (gc.freeze,
# after the URLconf has imported every view), and the youngest generation is collected
# every 50,000 objects instead of 700: a request's cycles wait a little longer, at most that
# many objects. Measured in bench/README.md.
get_resolver().reverse_dict  # noqa: B018 - imports every view module
gc.collect()
gc.freeze()
gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
