"""One stream from a decoupled model through Triton's generate extension, timed (no Django).

A decoupled model answers only over a stream (`infer` refuses it): `POST
/v2/models/<m>[/versions/<v>]/generate_stream` with a JSON object of input name to value
answers server-sent events, one per response, `data: {...}` each; an event with an `error`
key is a failed response, and the stream ends after the model's final flag. Triton sends the
HTTP header with the first event (docs/TRITON.md), so the time to the first event is the
stream's time to first token. Benchmarks (benchmarks/runner.py) time streams with this.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np

# A stream's events are read line by line; a line longer than this is a broken stream.
MAX_EVENT_BYTES = 1 << 20


@dataclass(frozen=True)
class StreamResult:
    """What one stream gave: seconds to its first event and to its end, its events (each a
    response: a token for a model that streams one token a response), and the error that
    failed it ("" for none)."""

    first_s: float | None
    total_s: float
    events: int
    error: str = ""

    @property
    def ok(self) -> bool:
        """Answered 200 and ended without an error event (a request for no output, say
        zero tokens, may end with no event at all)."""
        return not self.error

    @property
    def inter_event_ms(self) -> float | None:
        """Mean time between events after the first, None with fewer than two."""
        if self.first_s is None or self.events < 2:
            return None
        return (self.total_s - self.first_s) * 1000.0 / (self.events - 1)


def is_decoupled(config: dict) -> bool:
    """Whether a model config (as a dict) is decoupled: many responses to one request, so
    it answers HTTP and gRPC `infer` with an error and is only reached over a stream."""
    return bool((config.get("model_transaction_policy") or {}).get("decoupled"))


def generate_body(inputs: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """A generate request's JSON object from one request's tensors: each input's first
    value (bytes as text), the extension's shape for inputs of one element."""
    body = {}
    for name, array in inputs.items():
        value = np.asarray(array).reshape(-1)[0] if np.asarray(array).size else ""
        if isinstance(value, bytes | np.bytes_):
            value = bytes(value).decode("utf-8", "replace")
        body[name] = value.item() if isinstance(value, np.generic) else value
    return body


def stream_once(
    base_url: str,
    model: str,
    body: Mapping[str, Any],
    *,
    version: int | None = None,
    timeout_s: float = 30.0,
    connection: http.client.HTTPConnection | None = None,
) -> StreamResult:
    """Send one generate_stream request and read it to its end (a keep-alive `connection`
    may be given and is left open; else one is opened and closed)."""
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    conn = connection or http.client.HTTPConnection(parts.netloc, timeout=timeout_s)
    path = f"/v2/models/{quote(model, safe='')}"
    path += f"/versions/{int(version)}" if version is not None else ""
    started = time.perf_counter()
    try:
        conn.request(
            "POST",
            f"{path}/generate_stream",
            body=json.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        first = time.perf_counter() - started
        if response.status != 200:
            text = response.read(4096).decode("utf-8", "replace")
            return StreamResult(None, time.perf_counter() - started, 0, f"{response.status} {text}")
        events, error = _read_events(response)
        return StreamResult(first, time.perf_counter() - started, events, error)
    except (OSError, http.client.HTTPException) as exc:
        if connection is not None:
            connection.close()  # the next request reconnects
        return StreamResult(None, time.perf_counter() - started, 0, repr(exc)[:300])
    finally:
        if connection is None:
            conn.close()


def _read_events(response) -> tuple[int, str]:
    """(events, the first error event's text or "") of a stream read to its end."""
    events, error = 0, ""
    while True:
        line = response.readline(MAX_EVENT_BYTES + 1)
        if not line:
            return events, error
        if len(line) > MAX_EVENT_BYTES:
            return events, "an event longer than 1 MiB"
        if not line.startswith(b"data:"):
            continue
        events += 1
        try:
            data = json.loads(line[5:])
        except ValueError:
            continue
        if isinstance(data, dict) and "error" in data and not error:
            error = str(data["error"])[:300]
