"""Websocket routes of every app, in one list."""

from console.routing import websocket_urlpatterns as console_ws
from releases.ws_routing import websocket_urlpatterns as releases_ws
from telemetry.routing import websocket_urlpatterns as telemetry_ws

websocket_urlpatterns = [*console_ws, *telemetry_ws, *releases_ws]
