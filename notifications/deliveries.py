"""One attempt of a delivery: claim it, POST it signed, record the outcome.

The claim is a guarded UPDATE, so a delivery queued twice (a re-queued lost message, two
scanners of an older deployment) is sent by one attempt at a time; the POST happens outside
any transaction. A failed attempt is retried with exponential backoff until
SWITCHYARD_WEBHOOK_MAX_ATTEMPTS; an answer that retrying cannot change (a 4xx other than
408 and 429, a URL the allow-list no longer admits) fails the delivery at once.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from core.sealed import SecretError, unseal
from deployments.validation import allowed_networks, own_service_endpoints
from integrations.targets import TargetError, UnresolvedTarget
from notifications import sender, signing
from notifications.catalog import body_of
from notifications.models import Delivery

RETRIED_4XX = (408, 425, 429)


def retry_delay_s(attempts: int) -> float:
    """Seconds before attempt `attempts + 1`: base, 2 x base, 4 x base, ..."""
    return settings.SWITCHYARD_WEBHOOK_RETRY_BASE_S * 2 ** max(attempts - 1, 0)


def _claim(delivery_id: int) -> Delivery | None:
    now = timezone.now()
    hold = now + timedelta(seconds=2 * settings.SWITCHYARD_WEBHOOK_TIMEOUT_S + 30)
    due = Q(status=Delivery.Status.PENDING, next_attempt_at__lte=now + timedelta(seconds=1))
    abandoned = Q(status=Delivery.Status.SENDING, claimed_until__lt=now)
    ended = Delivery.objects.filter(
        abandoned, pk=delivery_id, attempts__gte=settings.SWITCHYARD_WEBHOOK_MAX_ATTEMPTS
    ).update(
        status=Delivery.Status.FAILED,
        claimed_until=None,
        last_error="The last attempt never finished.",
        updated_at=now,
    )
    if ended:
        return None
    # The attempt counts from its claim: an attempt that never finishes (a worker killed, a
    # receiver that never answers) still uses one up, so a delivery always comes to an end.
    claimed = Delivery.objects.filter(due | abandoned, pk=delivery_id).update(
        status=Delivery.Status.SENDING,
        claimed_until=hold,
        attempts=F("attempts") + 1,
        updated_at=now,
    )
    if not claimed:
        return None
    return Delivery.objects.select_related("webhook").get(pk=delivery_id)


def _is_final(answer: sender.Answer) -> bool:
    return (
        answer.status is not None
        and 400 <= answer.status < 500
        and (answer.status not in RETRIED_4XX)
    )


def _record(delivery: Delivery, answer: sender.Answer, *, final: bool = False) -> float | None:
    now = timezone.now()
    attempts = delivery.attempts  # this attempt included (counted by its claim)
    fields = {"response_code": answer.status, "claimed_until": None, "updated_at": now}
    retry_in = None
    if answer.is_ok:
        fields.update(status=Delivery.Status.DELIVERED, delivered_at=now)
    else:
        fields["last_error"] = answer.error
        if final or _is_final(answer) or attempts >= settings.SWITCHYARD_WEBHOOK_MAX_ATTEMPTS:
            fields["status"] = Delivery.Status.FAILED
        else:
            retry_in = retry_delay_s(attempts)
            due = now + timedelta(seconds=retry_in)
            fields.update(status=Delivery.Status.PENDING, next_attempt_at=due, queued_at=due)
    updated = Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.SENDING).update(
        **fields
    )
    return retry_in if updated else None


def delivery_attempt(*, delivery_id: int) -> float | None:
    """Make one attempt of a due delivery (nothing when it is not due, done, or held by
    another attempt); returns the seconds until the next attempt when one is scheduled."""
    delivery = _claim(delivery_id)
    if delivery is None:
        return None
    hook = delivery.webhook
    if not hook.is_active:
        return _record(delivery, sender.Answer(None, "The webhook is disabled."), final=True)
    try:  # resolved and checked now; the POST connects to the checked address
        target = sender.webhook_target(hook.url, allowed_networks(), own_service_endpoints())
    except UnresolvedTarget as exc:
        return _record(delivery, sender.Answer(None, str(exc)))  # DNS may answer later
    except TargetError as exc:
        return _record(delivery, sender.Answer(None, f"URL refused: {exc}"), final=True)
    document = body_of(payload=delivery.payload, delivery_id=str(delivery.uuid), fmt=hook.format)
    body = json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
    try:
        secret = unseal(hook.secret_sealed)
    except SecretError as exc:  # SWITCHYARD_SECRETS_KEY changed: retried, a key may come back
        return _record(delivery, sender.Answer(None, f"The signing secret: {exc}."))
    headers = signing.headers(
        secret=secret,
        timestamp=int(time.time()),
        body=body,
        event=delivery.event,
        delivery_id=str(delivery.uuid),
    )
    answer = sender.post(target, body, headers, timeout_s=settings.SWITCHYARD_WEBHOOK_TIMEOUT_S)
    return _record(delivery, answer)


def deliveries_prune() -> int:
    """Delete delivered and failed deliveries older than SWITCHYARD_WEBHOOK_LOG_DAYS; how many
    went. Pending ones stay whatever their age: their attempts are not over."""
    before = timezone.now() - timedelta(days=settings.SWITCHYARD_WEBHOOK_LOG_DAYS)
    finished = [Delivery.Status.DELIVERED, Delivery.Status.FAILED]
    deleted, _ = Delivery.objects.filter(status__in=finished, created_at__lt=before).delete()
    return deleted
