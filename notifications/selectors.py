"""Reads of webhooks and their delivery logs."""

from django.db.models import QuerySet

from notifications.models import Delivery, Webhook


def webhook_list() -> QuerySet[Webhook]:
    return Webhook.objects.select_related("created_by").order_by("id")


def webhook_get(*, webhook_id: int) -> Webhook | None:
    return webhook_list().filter(pk=webhook_id).first()


def deliveries_of(*, webhook: Webhook, status: str | None = None) -> QuerySet[Delivery]:
    """A webhook's delivery log, newest first, optionally of one status."""
    qs = Delivery.objects.filter(webhook=webhook)
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("-created_at", "-id")
