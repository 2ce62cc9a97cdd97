from django.urls import path

from notifications import apis

urlpatterns = [
    path("webhooks/", apis.WebhookListCreateApi.as_view(), name="api-webhooks"),
    path("webhooks/<int:webhook_id>/", apis.WebhookDetailApi.as_view(), name="api-webhook"),
    path(
        "webhooks/<int:webhook_id>/deliveries/",
        apis.DeliveryListApi.as_view(),
        name="api-webhook-deliveries",
    ),
]
