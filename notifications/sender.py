"""One HTTP POST of a webhook delivery. Plain Python; no redirects are followed (a receiver
cannot send the control plane on to another host), the answer is read at most 4 KiB."""

from __future__ import annotations

import http.client
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from integrations.targets import (
    Network,
    TargetError,
    check_host,
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


def webhook_url(url: object, networks: tuple[Network, ...]) -> str:
    """An http(s) URL a webhook may point at (path and query allowed, port optional); its
    host must pass the allow-list (SWITCHYARD_ALLOWED_TARGET_NETWORKS). TargetError if not."""
    parts = url_parts(url)
    try:
        port = parts.port
    except ValueError:
        raise TargetError(f"{url!r} is not a URL.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise TargetError(f"{url!r} must look like https://host[:port]/path.")
    refuse_credentials(url, parts)
    check_host(parts.hostname, networks)
    return url


def post(url: str, body: bytes, headers: dict[str, str], *, timeout_s: float) -> Answer:
    """POST `body` to `url`; a 2xx answer is success, anything else an error in words."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout_s, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
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
