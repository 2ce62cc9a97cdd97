"""Websocket routes of the console: the system page's socket."""

from django.urls import path

from console.consumers import SystemConsumer

websocket_urlpatterns = [
    path("ws/system/", SystemConsumer.as_asgi()),
]
