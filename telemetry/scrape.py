"""A small asyncio HTTP GET for loopback and LAN metrics endpoints (no extra dependency).

HTTP/1.0 with `Connection: close`: the server answers without chunking and closes, so the
body is everything after the headers. Any failure raises ScrapeError with a short reason.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

MAX_BYTES = 64 * 1024 * 1024


class ScrapeError(Exception):
    """The endpoint did not answer 200 in time; the message says why, in a few words."""


async def _exchange(host: str, port: int, target: str) -> bytes:
    reader, writer = await asyncio.open_connection(host, port, limit=MAX_BYTES)
    try:
        request = f"GET {target} HTTP/1.0\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
        writer.write(request.encode("latin-1"))
        await writer.drain()
        return await reader.read(-1)
    finally:
        writer.close()


async def http_get(url: str, timeout_s: float = 2.0) -> str:
    """The body of a 200 answer to GET url, decoded as UTF-8; ScrapeError otherwise."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ScrapeError(f"unsupported URL {url!r}")
    target = parts.path or "/"
    if parts.query:
        target += f"?{parts.query}"
    try:
        raw = await asyncio.wait_for(
            _exchange(parts.hostname, parts.port or 80, target), timeout=timeout_s
        )
    except TimeoutError as exc:
        raise ScrapeError(f"no answer within {timeout_s} s") from exc
    except OSError as exc:
        raise ScrapeError(exc.strerror or type(exc).__name__) from exc
    head, sep, body = raw.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1", "replace")
    fields = status_line.split(" ", 2)
    if not sep or len(fields) < 2 or not fields[0].startswith("HTTP/"):
        raise ScrapeError("malformed HTTP answer")
    if fields[1] != "200":
        raise ScrapeError(f"HTTP {fields[1]}")
    return body.decode("utf-8", "replace")
