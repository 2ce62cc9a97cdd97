"""Websocket routes of every app, in one list."""

from console.ws_routes import websocket_urlpatterns as console_ws
from plans.ws_routes import websocket_urlpatterns as plans_ws
from releases.ws_routes import websocket_urlpatterns as releases_ws
from telemetry.ws_routes import websocket_urlpatterns as telemetry_ws

websocket_urlpatterns = [*console_ws, *telemetry_ws, *releases_ws, *plans_ws]
