"""The ASGI body guard stops reading a chunked body as soon as it passes the limit."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

from controlplane.body_limit import BodyLimitMiddleware

CHUNK = b"x" * 1000


def _run(headers: list[tuple[bytes, bytes]], limit: int, chunks: int):
    received, sent, seen_by_app = [], [], []

    async def receive():
        received.append(1)
        return {"type": "http.request", "body": CHUNK, "more_body": len(received) < chunks}

    async def send(message):
        sent.append(message)

    async def app(scope, app_receive, app_send):
        body = b""
        while True:
            message = await app_receive()
            body += message["body"]
            if not message["more_body"]:
                break
        seen_by_app.append((dict(scope["headers"]), body))

    guard = BodyLimitMiddleware(app, max_bytes=lambda scope: limit)
    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    # A thread of its own: browser tests leave an event loop running in the main thread.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, guard(scope, receive, send)).result()
    return received, sent, seen_by_app


def test_a_chunked_body_past_the_limit_is_refused_without_reading_the_rest():
    chunked = [(b"transfer-encoding", b"chunked")]
    received, sent, seen_by_app = _run(chunked, limit=5500, chunks=10**6)
    assert len(received) == 6  # stopped at the first chunk past the limit
    assert sent[0]["status"] == 413 and not seen_by_app


def test_a_declared_length_past_the_limit_is_refused_before_reading_anything():
    received, sent, seen_by_app = _run([(b"content-length", b"9999")], limit=5000, chunks=10)
    assert received == [] and sent[0]["status"] == 413 and not seen_by_app


def test_a_chunked_body_under_the_limit_reaches_the_app_whole_with_its_length():
    received, sent, seen_by_app = _run([(b"transfer-encoding", b"chunked")], limit=10**6, chunks=7)
    headers, body = seen_by_app[0]
    assert body == CHUNK * 7 and headers[b"content-length"] == b"7000"
    assert b"transfer-encoding" not in headers and sent == []


def test_each_endpoint_has_its_limit(settings):
    from controlplane.body_limit import IMPORT_BODY_BYTES, limit_for

    settings.SWITCHYARD_MAX_UPLOAD_BYTES, settings.SWITCHYARD_MAX_BODY_BYTES = 4 * 2**30, 2**20
    assert limit_for("/api/v1/models/risk/versions/") == 4 * 2**30
    assert limit_for("/api/v1/models/risk/versions/?return_existing=1") == 4 * 2**30
    assert limit_for("/api/v1/models/risk/versions/3/benchmarks/import/") == IMPORT_BODY_BYTES
    assert limit_for("/models/risk/versions/3/benchmarks/import/") == IMPORT_BODY_BYTES
    for path in ("/api/v1/auth/token/", "/admin/login/", "/api/v1/models/risk/versions/3/"):
        assert limit_for(path) == 2**20
