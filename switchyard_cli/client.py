"""A small REST client over http.client: token auth, JSON, multipart upload with progress."""

import json
import os
import time
import tomllib
import uuid
from collections.abc import Callable
from http.client import HTTPConnection, HTTPSConnection
from pathlib import Path
from urllib.parse import urlencode, urlsplit

DEFAULT_URL = "http://127.0.0.1:8000"
CHUNK = 64 * 1024
# Retries after a connection error or a 5xx, for requests that are safe to send again:
# GET, PUT, DELETE, and POSTs carrying an Idempotency-Key (the server replays the first
# answer instead of doing the work twice). The pauses between attempts, in seconds.
RETRY_PAUSES_S = (0.5, 1.0, 2.0, 4.0)
RETRY_STATUSES = frozenset({500, 502, 503, 504})


class ApiError(Exception):
    """The API answered 4xx/5xx, or could not be reached (exit code 2)."""

    def __init__(self, status: int, payload, message: str):
        super().__init__(message)
        self.status, self.payload = status, payload


def config_path() -> Path:
    if os.environ.get("SWITCHYARD_CONFIG"):
        return Path(os.environ["SWITCHYARD_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "switchyard" / "config.toml"


def read_config() -> dict:
    path = config_path()
    if not path.is_file():
        return {}
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def write_config(url: str, token: str) -> Path:
    """Write url and token to the config file, readable by its owner only (0600)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:  # json strings are valid TOML basic strings
        handle.write(f"url = {json.dumps(url)}\ntoken = {json.dumps(token)}\n")
    os.chmod(path, 0o600)
    return path


def settings() -> tuple[str, str | None]:
    """(server URL, token): the environment wins over the config file."""
    config = read_config()
    url = os.environ.get("SWITCHYARD_URL") or config.get("url") or DEFAULT_URL
    token = os.environ.get("SWITCHYARD_TOKEN") or config.get("token")
    return url.rstrip("/"), token


def _error_message(status: int, payload) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("errors"), list):
        parts = []
        for error in payload["errors"]:
            field = error.get("field") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else str(error)
            parts.append(f"{field}: {text}" if field else str(text))
        return f"HTTP {status}: " + "; ".join(parts)
    if isinstance(payload, dict) and "detail" in payload:
        return f"HTTP {status}: {payload['detail']}"
    return f"HTTP {status}: {str(payload)[:300]}"


def _retryable(exc: ApiError) -> bool:
    """A connection error, a 5xx, or the same Idempotency-Key's first request still running."""
    if exc.status == 0 or exc.status in RETRY_STATUSES:
        return True
    errors = exc.payload.get("errors") if isinstance(exc.payload, dict) else None
    first = errors[0] if isinstance(errors, list) and errors else {}
    return (
        exc.status == 409
        and isinstance(first, dict)
        and first.get("field") == "Idempotency-Key"
        and "still running" in str(first.get("message"))
    )


class Client:
    def __init__(
        self,
        url: str,
        token: str | None,
        timeout_s: float = 60.0,
        retry_pauses_s: tuple[float, ...] = RETRY_PAUSES_S,
    ):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiError(0, None, f"not an http(s) URL: {url!r}")
        self.parts, self.token, self.timeout_s = parts, token, timeout_s
        self.retry_pauses_s = retry_pauses_s

    def _retrying(self, method: str, headers: dict, send: Callable[[int], object]):
        """send(attempt) once, and again after a retryable failure when that is safe."""
        safe = method in ("GET", "HEAD", "PUT", "DELETE") or "Idempotency-Key" in headers
        pauses = self.retry_pauses_s if safe else ()
        for attempt, pause in enumerate((*pauses, None)):
            try:
                return send(attempt)
            except ApiError as exc:
                if pause is None or not _retryable(exc):
                    raise
            time.sleep(pause)

    def _connection(self, timeout_s: float | None = None):
        kind = HTTPSConnection if self.parts.scheme == "https" else HTTPConnection
        return kind(self.parts.hostname, self.parts.port, timeout=timeout_s or self.timeout_s)

    def _path(self, path: str, query: dict | None) -> str:
        prefix = self.parts.path.rstrip("/")
        query = {k: v for k, v in (query or {}).items() if v is not None}
        return prefix + path + (f"?{urlencode(query)}" if query else "")

    def _headers(self, extra: dict | None = None) -> dict:
        headers = {"Accept": "application/json", **(extra or {})}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        return headers

    def request(self, method: str, path: str, *, body=None, query=None, headers=None, **kw):
        """Send a request (retried when safe); answer the decoded body (JSON, or text);
        raise ApiError on 4xx/5xx."""
        data = None if body is None else json.dumps(body).encode()
        extra = {"Content-Type": "application/json"} if data is not None else {}
        extra.update(headers or {})
        send = lambda attempt: self._once(method, self._path(path, query), data, extra, kw)  # noqa: E731
        return self._retrying(method, extra, send)

    def _once(self, method: str, path: str, data: bytes | None, extra: dict, kw: dict):
        conn = self._connection(kw.get("timeout_s"))
        try:
            conn.request(method, path, body=data, headers=self._headers(extra))
            return self._answer(conn.getresponse())
        except OSError as exc:
            raise ApiError(0, None, f"cannot reach {self.parts.geturl()}: {exc}") from exc
        finally:
            conn.close()

    def _answer(self, response):
        raw = response.read()
        kind = response.getheader("Content-Type") or ""
        payload = raw.decode(errors="replace")
        if "json" in kind and raw:
            payload = json.loads(raw)
        if response.status >= 400:
            raise ApiError(response.status, payload, _error_message(response.status, payload))
        return payload

    def upload(
        self, path: str, fields: dict, filename: str, data: bytes, progress: Callable, key: str
    ):
        """POST a multipart form with one file part, calling progress(sent, total).

        Sent with Idempotency-Key `key` and retried like any safe request: when the first
        attempt registered the version but its answer was lost, the retry gets that answer."""
        boundary = uuid.uuid4().hex
        head = b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
            for k, v in fields.items()
            if v is not None
        )
        head += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; '
            f'filename="{filename}"\r\nContent-Type: application/gzip\r\n\r\n'
        ).encode()
        body = head + data + f"\r\n--{boundary}--\r\n".encode()
        kind = f"multipart/form-data; boundary={boundary}"
        extra = {"Idempotency-Key": key}

        def send(attempt: int):
            return self._send_body(self._path(path, None), body, kind, progress, extra)

        return self._retrying("POST", extra, send)

    def _send_body(self, path: str, body: bytes, kind: str, progress: Callable, extra: dict):
        conn = self._connection(max(self.timeout_s, 300))
        try:
            conn.putrequest("POST", path)
            headers = self._headers(
                {"Content-Type": kind, "Content-Length": str(len(body)), **extra}
            )
            for key, value in headers.items():
                conn.putheader(key, value)
            conn.endheaders()
            for start in range(0, len(body), CHUNK):
                conn.send(body[start : start + CHUNK])
                progress(min(start + CHUNK, len(body)), len(body))
            return self._answer(conn.getresponse())
        except OSError as exc:
            raise ApiError(0, None, f"cannot reach {self.parts.geturl()}: {exc}") from exc
        finally:
            conn.close()
