"""Websocket routes of releases: the release cockpit's socket (traffic routing is `routing.py`)."""

from django.urls import path

from releases.consumers import ReleaseConsumer

websocket_urlpatterns = [path("ws/releases/<int:release_id>/", ReleaseConsumer.as_asgi())]
