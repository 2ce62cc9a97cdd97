"""Webhooks, their deliveries (the delivery log) and the outbox cursors.

Deliveries are made from rows other apps already write (audit rows, release events): each
(webhook, source row) pair gets at most one delivery, so scanning the same rows twice, or
twice at once, sends nothing twice.
"""

import uuid
from urllib.parse import urlsplit

from django.conf import settings
from django.db import models
from django.utils import timezone

from notifications.catalog import EVENTS, FORMATS, SEVERITIES


class Webhook(models.Model):
    url = models.CharField(max_length=300)
    # The signing secret, sealed (core/sealed.py): HMAC needs the key itself, so it is kept
    # encrypted, unsealed only to sign a delivery, and never returned by the API.
    secret_sealed = models.TextField()
    events = models.JSONField(default=list)  # names from notifications.catalog.EVENTS
    min_severity = models.CharField(
        max_length=10, choices=[(s, s) for s in SEVERITIES], default=SEVERITIES[0]
    )
    format = models.CharField(max_length=10, choices=[(f, f) for f in FORMATS], default="json")
    description = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    # Events from this moment on are delivered: set when made and when resumed after a pause,
    # so a pause drops the events that happen during it.
    active_since = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.host}"  # in audit rows: never the path or query

    @property
    def host(self) -> str:
        """The URL's host alone (a Slack or Teams URL's path is its secret)."""
        try:
            return urlsplit(self.url).hostname or ""
        except ValueError:
            return ""


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"  # waiting for its first or next attempt
        SENDING = "sending"  # an attempt holds it (until claimed_until)
        DELIVERED = "delivered"  # the receiver answered 2xx
        FAILED = "failed"  # every attempt failed, or the URL is no longer allowed

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    # The X-Switchyard-Delivery header: the same on every attempt, so receivers can dedupe.
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    event = models.CharField(max_length=40, choices=[(e, e) for e in EVENTS])
    severity = models.CharField(max_length=10)
    source = models.CharField(max_length=20)  # "audit" or "release_event"
    source_id = models.BigIntegerField()
    payload = models.JSONField()  # the event as sent (the body is built from it per format)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_index=True)
    # When a task for the next attempt was queued (or is due to run): the scanner re-queues
    # only deliveries whose task has not run a while after that (a lost message).
    queued_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["webhook", "source", "source_id"], name="one_delivery_per_source_row"
            )
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event} → webhook {self.webhook_id} ({self.status})"


class OutboxCursor(models.Model):
    """The highest id of each source the scanner has read (it also re-reads a short window
    behind it, for rows whose transaction committed late)."""

    source = models.CharField(max_length=20, primary_key=True)
    last_id = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.source} @ {self.last_id}"
