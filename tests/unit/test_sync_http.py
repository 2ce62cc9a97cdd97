"""The web's plain-HTTP path (controlplane/sync_http.py): the WSGI environ made from an ASGI
scope, which requests stay on the ASGI handler, and a request whose client leaves still
finishing in its thread (response closed, so `request_finished` gives its connections back).
Requests through a real daphne: tests/integration/test_web_server.py and the fault tests."""

import asyncio
import threading

from controlplane.sync_http import SyncHttp, environ_of, is_async, run_wsgi


def _scope(**extra) -> dict:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/models/é/",
        "root_path": "",
        "query_string": b"search=a%20b&limit=5",
        "http_version": "1.1",
        "scheme": "https",
        "server": ("127.0.0.1", 8000),
        "client": ("10.0.0.7", 51000),
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
            (b"authorization", b"Token abc"),
            (b"x-forwarded-for", b"1.2.3.4"),
            (b"x-forwarded-for", b"5.6.7.8"),
        ],
    }
    return scope | extra


def test_the_environ_carries_the_request_as_a_wsgi_server_would():
    body = object()
    environ = environ_of(_scope(), body)
    assert environ["REQUEST_METHOD"] == "POST"
    assert environ["PATH_INFO"] == "/api/v1/models/é/".encode().decode("latin-1")
    assert environ["QUERY_STRING"] == "search=a%20b&limit=5"
    assert environ["CONTENT_TYPE"] == "application/json"
    assert environ["CONTENT_LENGTH"] == "2"
    assert "HTTP_CONTENT_TYPE" not in environ
    assert environ["HTTP_AUTHORIZATION"] == "Token abc"
    assert environ["HTTP_X_FORWARDED_FOR"] == "1.2.3.4,5.6.7.8"
    assert environ["REMOTE_ADDR"] == "10.0.0.7"
    assert (environ["SERVER_NAME"], environ["SERVER_PORT"]) == ("127.0.0.1", "8000")
    assert environ["wsgi.url_scheme"] == "https"
    assert environ["wsgi.input"] is body
    assert environ["SERVER_PROTOCOL"] == "HTTP/1.1"


def test_a_root_path_is_the_script_name():
    environ = environ_of(_scope(root_path="/sy", path="/sy/api/v1/models/"), None)
    assert (environ["SCRIPT_NAME"], environ["PATH_INFO"]) == ("/sy", "/api/v1/models/")


def test_long_polls_stay_on_the_asgi_handler():
    assert is_async({"query_string": b"wait=30"})
    assert is_async({"query_string": b"x=1&wait=5"})
    assert not is_async({"query_string": b"limit=5"})
    assert not is_async({"query_string": b"nowait=5"})
    assert not is_async({})


class _Body:
    closed = False

    def close(self):
        self.closed = True


def test_the_response_and_the_body_are_closed_in_the_thread():
    closed = []

    class Result(list):
        def close(self):
            closed.append(True)

    def app(environ, start_response):
        start_response("201 Created", [("Content-Type", "text/plain"), ("X-A", "b")])
        return Result([b"one ", b"two"])

    body = _Body()
    status, headers, content = run_wsgi(app, {"wsgi.input": body})
    assert (status, content) == (201, b"one two")
    assert headers == [(b"content-type", b"text/plain"), (b"x-a", b"b")]
    assert closed == [True] and body.closed


def test_a_request_whose_client_left_finishes_in_its_thread():
    """The wait on the loop is cancelled (the client left, the server killed the instance);
    the thread goes on to the end of the request and closes its response."""
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    class Result(list):
        def close(self):
            finished.set()

    def app(environ, start_response):
        entered.set()
        release.wait(10)
        start_response("200 OK", [])
        return Result([b"late"])

    async def asgi_app(scope, receive, send):  # never reached: a plain request
        raise AssertionError("a plain request went to the ASGI handler")

    http = SyncHttp(app, asgi_app, threads=2)
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    async def main():
        task = asyncio.ensure_future(http(_scope(method="GET", headers=[]), receive, send))
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 10)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert not finished.is_set()
    release.set()
    assert finished.wait(10)
    http.executor.shutdown(wait=True)
    assert sent == []


def test_a_body_in_several_messages_reaches_the_view_whole():
    seen = []

    def app(environ, start_response):
        seen.append(environ["wsgi.input"].read())
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    http = SyncHttp(app, None, threads=1)
    parts = iter([b"ab", b"cd", b"e"])
    sent = []

    async def receive():
        chunk = next(parts, None)
        return {"type": "http.request", "body": chunk or b"", "more_body": chunk is not None}

    async def send(message):
        sent.append(message)

    asyncio.run(http(_scope(headers=[]), receive, send))
    http.executor.shutdown(wait=True)
    assert seen == [b"abcde"]
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"ok"
