"""Websocket routes of every app, in one list."""

from console.routing import websocket_urlpatterns as console_ws

websocket_urlpatterns = [*console_ws]
