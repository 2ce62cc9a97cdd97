"""A real webhook receiver for tests: a threading HTTP server on a free port that records
every request (headers and raw body) and answers with scripted status codes."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from notifications.signing import verify


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def document(self) -> dict:
        return json.loads(self.body)

    def is_signed_with(self, secret: str) -> bool:
        return verify(
            secret=secret,
            timestamp=self.headers.get("x-switchyard-timestamp", ""),
            signature_header=self.headers.get("x-switchyard-signature", ""),
            body=self.body,
            now=time.time(),
        )


class Receiver:
    """`statuses` answer the requests in order (200 once they run out)."""

    def __init__(self, statuses: list[int] | None = None):
        self.requests: list[Received] = []
        self.statuses = list(statuses or [])
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.requests.append(Received(self.path, headers, body, status))
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"receiver says no")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/switchyard"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    def events(self) -> list[str]:
        with self._lock:
            return [r.headers.get("x-switchyard-event", "") for r in self.requests]

    def wait_for(self, count: int, timeout_s: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.1)
        raise AssertionError(f"{len(self.requests)} of {count} requests after {timeout_s} s")
