"""Websocket routes of telemetry: live points of a cluster or a model."""

from django.urls import re_path

from telemetry import consumers

websocket_urlpatterns = [
    re_path(r"^ws/clusters/(?P<name>[^/]+)/$", consumers.ClusterLiveConsumer.as_asgi()),
    re_path(r"^ws/models/(?P<name>[^/]+)/$", consumers.ModelLiveConsumer.as_asgi()),
]
