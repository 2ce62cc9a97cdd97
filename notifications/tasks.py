"""Webhook tasks: the outbox scan (beat) and one delivery attempt; safe to run twice."""

from celery import shared_task

from notifications.deliveries import deliveries_prune, delivery_attempt
from notifications.outbox import outbox_scan


@shared_task(name="notifications.outbox_scan", soft_time_limit=30, time_limit=60)
def scan_outbox() -> int:
    """Record deliveries for new events and queue an attempt of each due one."""
    due = outbox_scan()
    for delivery_id in due:
        deliver.delay(delivery_id)
    return len(due)


@shared_task(name="notifications.deliver", soft_time_limit=60, time_limit=90)
def deliver(delivery_id: int) -> str:
    """One attempt of a delivery; a failed one queues the next after its backoff."""
    retry_in = delivery_attempt(delivery_id=delivery_id)
    if retry_in is not None:
        deliver.apply_async((delivery_id,), countdown=retry_in)
        return f"retry in {retry_in:g} s"
    return "done"


@shared_task(name="notifications.deliveries_prune", soft_time_limit=120, time_limit=150)
def prune_deliveries() -> int:
    """Drop finished deliveries past the log's retention."""
    return deliveries_prune()
