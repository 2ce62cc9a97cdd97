"""ASGI guard on request bodies: past its endpoint's limit a request is answered 413 while
its body streams in, chunked ones (no Content-Length) included.

The limit is per endpoint (`limit_for`): a version upload may carry an archive up to
SWITCHYARD_MAX_UPLOAD_BYTES, a benchmark result import 6 MiB, every other request
SWITCHYARD_MAX_BODY_BYTES (1 MiB).

A declared Content-Length over the limit is refused before any byte is read. A chunked body
is counted as it arrives and spooled (memory, then a temporary file) up to the limit, then
handed to Django with its Content-Length, so the upload's size check and parser see it like
any other request. daphne reads a whole body before it calls the app, so under daphne the
same limits are applied earlier, as the bytes arrive (controlplane/daphne_limits.py); this
middleware is the rule for any ASGI server. nginx's `client_max_body_size` stays the first
line in production (docs/SECURITY.md).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Awaitable, Callable
from typing import IO

from django.conf import settings

CHUNK = 64 * 1024
SPOOL_IN_MEMORY = 2 * 1024 * 1024

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


# The one endpoint that takes archives: POST /api/v1/models/<name>/versions/.
UPLOAD_PATH = re.compile(r"/api/v1/models/[^/]+/versions/")
# Imported benchmark results (API and console form): files up to 5 MiB (benchmarks/apis.py
# MAX_IMPORT_BYTES) and the multipart form around them.
IMPORT_PATH = re.compile(r"(/api/v1)?/models/[^/]+/versions/\d+/benchmarks/import/")
IMPORT_BODY_BYTES = 6 * 1024 * 1024


def limit_for(path: str) -> int:
    """The largest body a request to `path` may carry, in bytes."""
    path = path.split("?", 1)[0]
    if UPLOAD_PATH.fullmatch(path):
        return settings.SWITCHYARD_MAX_UPLOAD_BYTES
    if IMPORT_PATH.fullmatch(path):
        return max(IMPORT_BODY_BYTES, settings.SWITCHYARD_MAX_BODY_BYTES)
    return settings.SWITCHYARD_MAX_BODY_BYTES


def _scope_limit(scope: dict) -> int:
    return limit_for(scope.get("path", ""))


class BodyLimitMiddleware:
    """Wraps the HTTP app; `max_bytes(scope)` is read per request (settings change in tests)."""

    def __init__(self, app, *, max_bytes: Callable[[dict], int] = _scope_limit) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.max_bytes(scope)
        headers = dict(scope.get("headers") or [])
        declared = _declared_length(headers)
        if declared is not None:
            if declared > limit:
                return await _refuse(send, limit)
            return await self.app(scope, receive, send)
        if b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
            return await self.app(scope, receive, send)
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
            size = await _spool_body(receive, spool, limit)
            if size is None:
                return await _refuse(send, limit)
            if size < 0:
                return None  # the client went away
            await self.app(_with_length(scope, size), _replay(spool, size, receive), send)
        return None


def _declared_length(headers: dict[bytes, bytes]) -> int | None:
    try:
        return int(headers[b"content-length"])
    except (KeyError, ValueError):
        return None


async def _spool_body(receive: Receive, spool: IO[bytes], limit: int) -> int | None:
    """The body's size once spooled; None past `limit`, -1 when the client disconnected."""
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return -1
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        spool.write(chunk)
        if not message.get("more_body"):
            spool.seek(0)
            return size


def _with_length(scope: dict, size: int) -> dict:
    headers = [(k, v) for k, v in scope["headers"] if k != b"transfer-encoding"]
    return {**scope, "headers": [*headers, (b"content-length", str(size).encode())]}


def _replay(spool: IO[bytes], size: int, receive: Receive) -> Receive:
    """Hands the spooled body out in chunks, then the client's own messages (disconnect)."""
    sent = 0

    async def replay() -> dict:
        nonlocal sent
        if sent >= size and sent > 0:
            return await receive()
        chunk = spool.read(CHUNK)
        sent += len(chunk) or 1  # an empty body is one empty message
        return {"type": "http.request", "body": chunk, "more_body": sent < size}

    return replay


def refusal_body(limit: int) -> bytes:
    """The 413 answer's body, in the API's error shape."""
    message = f"The request body is larger than the limit of {limit} bytes."
    return json.dumps({"errors": [{"field": None, "message": message}]}).encode()


async def _refuse(send: Send, limit: int) -> None:
    body = refusal_body(limit)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
