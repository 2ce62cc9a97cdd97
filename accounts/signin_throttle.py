"""Failed sign-ins counted per username and per client IP in fixed windows (shared cache).

Once either count reaches its limit, sign-ins for that username or from that IP are refused
(429 with Retry-After) until the window ends, whatever the password; successful sign-ins do
not count. Used by the console login form, the token endpoint and the admin login; the
per-IP count is checked before a request's body is parsed (signin_ip_retry_after).
"""

import hashlib
import time

from django.conf import settings
from django.core.cache import cache

from accounts.client_ip import client_ip


def _window() -> tuple[int, int]:
    """(window number, seconds left in it)."""
    size = settings.SWITCHYARD_SIGNIN_WINDOW_S
    now = int(time.time())
    return now // size, size - now % size


def _keys(username: str, ip: str) -> list[tuple[str, int]]:
    number, _ = _window()
    user = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [
        (f"signin-fail:{number}:user:{user}", settings.SWITCHYARD_SIGNIN_MAX_FAILURES_PER_USER),
        (f"signin-fail:{number}:ip:{ip}", settings.SWITCHYARD_SIGNIN_MAX_FAILURES_PER_IP),
    ]


def signin_retry_after(request, username: str) -> int | None:
    """Seconds until sign-ins for this username / from this IP are allowed again, or None."""
    keys = _keys(username, client_ip(request))
    counts = cache.get_many([key for key, _ in keys])
    if any(counts.get(key, 0) >= limit for key, limit in keys):
        return _window()[1]
    return None


def signin_ip_retry_after(request) -> int | None:
    """Seconds until sign-ins from this client IP are allowed again, or None; reads no body,
    so it runs before a sign-in request is parsed."""
    key, limit = _keys("", client_ip(request))[1]
    if (cache.get(key) or 0) >= limit:
        return _window()[1]
    return None


def signin_failure_record(request, username: str) -> None:
    """Count one failed sign-in against the username and the client IP."""
    timeout = settings.SWITCHYARD_SIGNIN_WINDOW_S + 5
    for key, _ in _keys(username, client_ip(request)):
        cache.add(key, 0, timeout=timeout)
        cache.incr(key)
