"""Plain HTTP requests through Django's sync handler on a pool of threads.

Django's ASGI handler costs several milliseconds of CPU a request before the view runs: it
adapts the middleware chain between async and sync and hops to a thread of the request's own
several times (measured on the 2-core VM: an API detail 11.6 ms of web CPU under daphne
against 5.2 under a WSGI server, for a view of 3 ms; bench/README.md, api_scale). Almost
every request the web answers is a plain one whose view is sync code, so `SyncHttp` runs it
the way a WSGI server does: the request's body is read on the loop (into memory, or a
temporary file past SPOOL_IN_MEMORY), then one hop to a thread of this process's pool runs
Django's WSGI handler whole (middleware, view, response) and closes the response there, which
sends `request_finished` and gives the thread's database connection back to the pool before
the answer is written. A client that leaves, or an instance the server kills, cancels only the
wait on the loop: the thread finishes its request and gives its connection back all the same,
and a slow reader holds no thread and no connection (the answer is bytes by then).

What needs the loop stays on Django's ASGI handler (`is_async`): a long-poll (`?wait=`,
accounts/waits.py) parks on the channel layer without a thread. Those requests resolve in
controlplane/urls_waiting.py (`WaitingHandler`), where each long-poll view is its async
twin; everywhere else it is a plain sync view. Websockets never come here.

The pool has as many threads as the process's database pool has connections
(SWITCHYARD_DATABASE_POOL_SIZE; SWITCHYARD_WEB_THREADS sets another count), so a request
never waits on the database pool for a connection another of this process's requests holds
while it waits for the GIL.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import IO

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler, ASGIRequest

SPOOL_IN_MEMORY = 2 * 1024 * 1024


def is_async(scope: dict) -> bool:
    """Requests Django's ASGI handler serves: long-polls (`wait=` in the query)."""
    query = scope.get("query_string", b"")
    return query.startswith(b"wait=") or b"&wait=" in query


class _WaitingRequest(ASGIRequest):
    urlconf = "controlplane.urls_waiting"  # Django's resolve_request reads it


class WaitingHandler(ASGIHandler):
    """Django's ASGI handler for the requests that wait: they resolve in
    controlplane/urls_waiting.py."""

    request_class = _WaitingRequest


def environ_of(scope: dict, body: IO[bytes]) -> dict:
    """The WSGI environ of an ASGI HTTP scope (PEP 3333: latin-1 strings)."""
    root = scope.get("root_path", "")
    path = scope["path"]
    if root and path.startswith(root):
        path = path[len(root) :]
    server = scope.get("server") or ("localhost", 80)
    environ = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": root.encode().decode("latin-1"),
        "PATH_INFO": path.encode().decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] if server[1] is not None else 80),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if scope.get("client"):
        environ["REMOTE_ADDR"] = scope["client"][0]
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        if name not in ("CONTENT_LENGTH", "CONTENT_TYPE"):
            name = f"HTTP_{name}"
        value = raw_value.decode("latin-1")
        # Repeated headers join with a comma (RFC 9110 5.3), as WSGI servers do.
        environ[name] = f"{environ[name]},{value}" if name in environ else value
    return environ


def run_wsgi(app, environ: dict) -> tuple[int, list, bytes]:
    """Django's whole request in this thread: (status, headers, body). The response is closed
    here, whatever happens, which sends `request_finished` (connections given back)."""
    started: list = []

    def start_response(status: str, headers: list, exc_info=None) -> None:
        started[:] = [int(status.split(" ", 1)[0]), headers]

    try:
        result = app(environ, start_response)
        try:
            body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
    finally:
        environ["wsgi.input"].close()
    status, headers = started
    return status, [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers], body


async def _read_body(receive) -> IO[bytes]:
    body = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115 - closed by caller
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            body.close()
            raise asyncio.CancelledError("the client left before its body arrived")
        body.write(message.get("body", b""))
        if not message.get("more_body"):
            body.seek(0)
            return body


class SyncHttp:
    """ASGI app for `http` scopes: plain requests through `wsgi_app` on `threads` threads,
    the rest (`is_async`) through `asgi_app`."""

    def __init__(self, wsgi_app, asgi_app, threads: int) -> None:
        self.wsgi_app, self.asgi_app = wsgi_app, asgi_app
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="http")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or is_async(scope):
            return await self.asgi_app(scope, receive, send)
        environ = environ_of(scope, await _read_body(receive))  # the thread closes its body
        # asgiref's hop (not the loop's run_in_executor) so that the thread knows this loop:
        # a view's async_to_sync (a channel-layer send) runs on it, not on a loop of its own.
        run = sync_to_async(run_wsgi, thread_sensitive=False, executor=self.executor)
        status, headers, content = await run(self.wsgi_app, environ)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})
