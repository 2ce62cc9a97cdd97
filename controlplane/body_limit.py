"""ASGI guard on request bodies: past SWITCHYARD_MAX_UPLOAD_BYTES a request is answered 413
while its body streams in, chunked ones (no Content-Length) included.

A declared Content-Length over the limit is refused before any byte is read. A chunked body
is counted as it arrives and spooled (memory, then a temporary file) up to the limit, then
handed to Django with its Content-Length, so the upload's size check and parser see it like
any other request. The reverse proxy stays the first line: daphne buffers a body before the
app sees it, so production sets nginx's `client_max_body_size` (docs/SECURITY.md).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Awaitable, Callable
from typing import IO

from django.conf import settings

CHUNK = 64 * 1024
SPOOL_IN_MEMORY = 2 * 1024 * 1024

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


def _default_limit() -> int:
    return settings.SWITCHYARD_MAX_UPLOAD_BYTES


class BodyLimitMiddleware:
    """Wraps the HTTP app; `max_bytes()` is read per request (settings can change in tests)."""

    def __init__(self, app, *, max_bytes: Callable[[], int] = _default_limit) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.max_bytes()
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


async def _refuse(send: Send, limit: int) -> None:
    message = f"The request body is larger than the limit of {limit} bytes."
    body = json.dumps({"errors": [{"field": None, "message": message}]}).encode()
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
