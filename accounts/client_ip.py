"""The client's IP address, decided in one place for every throttle and audit row.

REMOTE_ADDR unless the operator says a proxy sits in front: SWITCHYARD_CLIENT_IP_HEADER
names a header the proxy always overwrites (its last entry counts), or
SWITCHYARD_PROXY_COUNT > 0 trusts X-Forwarded-For and takes the address that many hops
from the right (the one the outermost trusted proxy saw). Entries further left come from
the client and are never trusted.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from rest_framework.throttling import ScopedRateThrottle


def _address(value: str) -> str | None:
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        return None


def client_ip(request) -> str:
    """The client address of `request` under the proxy settings (REMOTE_ADDR by default)."""
    remote = request.META.get("REMOTE_ADDR", "")
    header = settings.SWITCHYARD_CLIENT_IP_HEADER
    if header:
        value = request.META.get(header, "").split(",")[-1]
        return _address(value) or remote
    hops = settings.SWITCHYARD_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if hops <= 0 or not forwarded:
        return remote
    entries = forwarded.split(",")
    return _address(entries[-min(hops, len(entries))]) or remote


class ClientIpScopedThrottle(ScopedRateThrottle):
    """DRF's scoped throttle keyed on client_ip() (DRF alone would trust X-Forwarded-For)."""

    def get_ident(self, request) -> str:
        return client_ip(request)
