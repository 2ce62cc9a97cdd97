"""Request body limits under daphne, applied as the bytes arrive.

daphne (Twisted) collects a request's whole body before it calls the ASGI app, then hands
it over at once, so an ASGI middleware alone would see a 4 GiB body only once it is held.
`install()` gives daphne a request class that applies `controlplane.body_limit.limit_for`
while the body comes in: a declared Content-Length over the limit is answered 413 as soon
as the headers are read, a chunked body the moment it passes the limit, and nothing past
the limit is kept. The answer is the API's error shape; what the client still sends is
read and dropped (up to DRAIN_BYTES, so it can read the answer), then the connection
closes. Imports no app: the limits are settings.
"""

from __future__ import annotations

import sys

from controlplane.body_limit import limit_for, refusal_body

DRAIN_BYTES = 8 * 1024 * 1024
CLOSE_AFTER_S = 5.0


def install() -> bool:
    """Make daphne's HTTP requests limited ones; False (nothing changed) outside daphne."""
    if "daphne.server" not in sys.modules:
        return False  # another server, or no server: importing daphne here would pick a reactor
    from daphne import http_protocol

    if not getattr(http_protocol.WebRequest, "is_body_limited", False):
        http_protocol.WebRequest = _limited(http_protocol.WebRequest)
    return True


def _answer(limit: int) -> bytes:
    body = refusal_body(limit)
    head = (
        "HTTP/1.1 413 Content Too Large\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _limited(base: type) -> type:
    class LimitedWebRequest(base):
        """daphne's request, refusing a body past its endpoint's limit while it arrives."""

        is_body_limited = True
        body_limit, body_received, body_dropped, is_refused = 0, 0, 0, False

        def gotLength(self, length: int | None) -> None:  # noqa: N802 (Twisted's name)
            path = getattr(self.channel, "_path", b"") or b""
            self.body_limit = limit_for(path.decode("latin-1"))
            too_long = length is not None and length > self.body_limit
            super().gotLength(0 if too_long else length)
            if too_long:
                self._refuse()

        def handleContentChunk(self, data: bytes) -> None:  # noqa: N802
            if self.is_refused:
                self.body_dropped += len(data)
                if self.body_dropped > DRAIN_BYTES:
                    self.channel.transport.loseConnection()
                return
            self.body_received += len(data)
            if self.body_received > self.body_limit:
                return self._refuse()
            super().handleContentChunk(data)

        def requestReceived(self, command, path, version) -> None:  # noqa: N802
            if not self.is_refused:
                # Twisted would parse every urlencoded or multipart POST body into `args`
                # before daphne hands it to the app (which parses it again): a second copy
                # of an upload in memory, and a malformed multipart body answered 400 with
                # no body at all, outside the API's error shape. daphne never reads `args`.
                self._parsePOSTFormSubmission = False  # Request.__init__ sets it per request
                super().requestReceived(command, path, version)

        def _refuse(self) -> None:
            from twisted.internet import reactor

            self.is_refused = True
            self.requestHeaders.removeHeader(b"expect")  # no "100 Continue" after the answer
            transport = self.channel.transport
            transport.write(_answer(self.body_limit))
            reactor.callLater(CLOSE_AFTER_S, transport.loseConnection)

    return LimitedWebRequest
