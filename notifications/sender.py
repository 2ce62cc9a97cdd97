"""One HTTP POST of a webhook delivery. Plain Python; no redirects are followed (a receiver
cannot send the control plane on to another host), the answer is read at most 4 KiB.

The host is resolved and checked when the delivery is sent (`webhook_target`), and the
connection goes to that checked address (the name stays in Host and in TLS), so a name
cannot resolve to an inside address between the check and the connect."""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from integrations.targets import (
    Address,
    Network,
    TargetError,
    checked_addresses,
    hits_endpoint,
    refuse_credentials,
    url_parts,
)

READ_LIMIT = 4096


@dataclass(frozen=True)
class Answer:
    status: int | None  # the HTTP status, None when no answer came
    error: str  # empty on 2xx

    @property
    def is_ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True)
class Target:
    url: str
    addresses: tuple[str, ...]  # the checked addresses the connection may go to, in order


def webhook_target(
    url: object, networks: tuple[Network, ...], services: Iterable[tuple[Address, int]] = ()
) -> Target:
    """An http(s) URL a webhook may point at (path and query allowed, port optional) with the
    address to connect to: its host, resolved now, must name only addresses the allow-list
    admits (SWITCHYARD_ALLOWED_TARGET_NETWORKS) and none of `services` (the control plane's
    own). TargetError if not (UnresolvedTarget when the name resolves to nothing)."""
    parts = url_parts(url)
    try:
        port = parts.port
    except ValueError:
        raise TargetError(f"{url!r} is not a URL.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise TargetError(f"{url!r} must look like https://host[:port]/path.")
    refuse_credentials(str(url), parts)
    port = port or (443 if parts.scheme == "https" else 80)
    addresses = checked_addresses(parts.hostname, networks)
    for address in addresses:
        if hits_endpoint(address, port, services):
            raise TargetError(
                f"Host {parts.hostname}:{port} is one of the control plane's own services."
            )
    return Target(str(url), tuple(str(address) for address in addresses))


def webhook_url(
    url: object, networks: tuple[Network, ...], services: Iterable[tuple[Address, int]] = ()
) -> str:
    """The URL when webhook_target accepts it now (TargetError if not)."""
    return webhook_target(url, networks, services).url


def post(target: Target, body: bytes, headers: dict[str, str], *, timeout_s: float) -> Answer:
    """POST `body` to the target's checked addresses (the first that connects); a 2xx answer
    is success, anything else an error in words."""
    parts = urlsplit(target.url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout_s, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)

    def connect_checked(address, timeout, source_address=None):
        error: OSError = OSError(f"No address to connect to for {parts.hostname}")
        for checked in target.addresses:  # like create_connection, over the checked ones only
            try:
                return socket.create_connection((checked, address[1]), timeout, source_address)
            except OSError as exc:
                error = exc
        raise error

    conn._create_connection = connect_checked  # the name was resolved and checked: use that
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read(READ_LIMIT).decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, f"{type(exc).__name__}: {exc}"[:500])
    finally:
        conn.close()
    if 200 <= response.status < 300:
        return Answer(response.status, "")
    return Answer(response.status, f"HTTP {response.status}: {text.strip()[:300]}")
