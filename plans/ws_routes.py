"""Websocket routes of plans: the plan page's socket."""

from django.urls import path

from plans.consumers import PlanConsumer

websocket_urlpatterns = [path("ws/plans/<int:plan_id>/", PlanConsumer.as_asgi())]
