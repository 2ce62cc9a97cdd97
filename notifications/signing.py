"""Signing webhook deliveries, and the check a receiver runs (docs/WEBHOOKS.md). Pure.

The signature covers the timestamp and the raw body: `sha256=` + hex HMAC-SHA256, keyed with
the webhook's secret, of `<timestamp>.<raw body>` (the timestamp as sent in
X-Switchyard-Timestamp, decimal Unix seconds). A receiver refuses a timestamp outside its
replay window, so a captured request cannot be replayed later.
"""

import hashlib
import hmac

REPLAY_WINDOW_S = 300


def signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The X-Switchyard-Signature value of `body` sent at `timestamp`."""
    message = str(int(timestamp)).encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def headers(*, secret: str, timestamp: int, body: bytes, event: str, delivery_id: str) -> dict:
    """Every header of one delivery attempt."""
    return {
        "Content-Type": "application/json",
        "User-Agent": "Switchyard-Webhooks/1",
        "X-Switchyard-Event": event,
        "X-Switchyard-Delivery": delivery_id,
        "X-Switchyard-Timestamp": str(int(timestamp)),
        "X-Switchyard-Signature": signature(secret=secret, timestamp=timestamp, body=body),
    }


def verify(
    *,
    secret: str,
    timestamp: str,
    signature_header: str,
    body: bytes,
    now: float,
    window_s: float = REPLAY_WINDOW_S,
) -> bool:
    """True when the signature matches and the timestamp lies within `window_s` of `now`."""
    try:
        sent = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(now - sent) > window_s:
        return False
    expected = signature(secret=secret, timestamp=sent, body=body)
    return hmac.compare_digest(expected, str(signature_header))
