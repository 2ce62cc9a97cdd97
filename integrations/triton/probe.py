"""Cheap reads of one model on one node, for loops that ask every second (release ticks).

Plain `http.client`: readiness of one version and the model's loaded versions go over one
connection to the node's HTTP port, the metrics text over one to its metrics port, and both
are closed before returning (an idle kept-alive connection would make the node's shutdown
wait about 30 s, see client.py). Building a `TritonClient` (an HTTP and a gRPC client) costs
about four times the CPU of these three requests; on a control plane that shares cores with
the data plane that CPU shows up in the clients' latency.

Loaded versions come from `/v2/models/{model}/stats`, which lists pushed models too (the
repository index does not, docs/TRITON.md §api) and answers 400 "not available" when no version
of the model is loaded.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from integrations.triton.errors import PermanentTritonError, TransientTritonError, translate


@dataclass(frozen=True)
class ModelProbe:
    """What one node said about one model."""

    ready: bool  # the version asked about is READY
    loaded: frozenset[str]  # the model's loaded versions
    metrics: str | None  # the node's Prometheus text (None without a metrics URL)


def _connection(url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s), parts.path


def _get(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


def probe_model(
    http_url: str,
    model: str,
    version: str | int,
    *,
    metrics_url: str | None = None,
    timeout_s: float = 2.0,
) -> ModelProbe:
    """Readiness of `version`, the loaded versions of `model`, and the metrics text.

    Raises TransientTritonError when the node cannot be reached or answers 5xx, and
    PermanentTritonError for an answer that makes no sense (a proxy's error page, say).
    """
    name = quote(model, safe="")
    where = urlsplit(http_url if "://" in http_url else f"http://{http_url}").netloc
    conn, _ = _connection(http_url, timeout_s)
    try:
        ready_status, _ = _get(conn, f"/v2/models/{name}/versions/{quote(str(version))}/ready")
        stats_status, stats = _get(conn, f"/v2/models/{name}/stats")
        text = None
        if metrics_url:
            metrics_conn, path = _connection(metrics_url, timeout_s)
            try:
                metrics_status, body = _get(metrics_conn, path or "/metrics")
            finally:
                metrics_conn.close()
            if metrics_status != 200:
                raise _error(metrics_status, "the metrics", where, model)
            text = body.decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        raise translate(exc, node=where, operation="probe", model=model) from exc
    finally:
        conn.close()
    if ready_status not in (200, 400, 404):
        raise _error(ready_status, "its readiness", where, model)
    if stats_status == 200:
        try:
            rows = json.loads(stats)["model_stats"]
            loaded = frozenset(str(row["version"]) for row in rows if row["name"] == model)
        except (ValueError, KeyError, TypeError) as exc:
            raise PermanentTritonError(
                f"Could not read the stats of model {model!r} on Triton node {where}: {exc}.",
                node=where,
                operation="probe",
                model=model,
            ) from exc
    elif stats_status in (400, 404):  # "requested model ... is not available"
        loaded = frozenset()
    else:
        raise _error(stats_status, "its stats", where, model)
    return ModelProbe(ready=ready_status == 200, loaded=loaded, metrics=text)


def _error(status: int, what: str, node: str, model: str) -> Exception:
    kind = TransientTritonError if status >= 500 or status in (408, 429) else PermanentTritonError
    return kind(
        f"Could not read {what} for model {model!r} on Triton node {node}: HTTP {status}.",
        node=node,
        operation="probe",
        model=model,
        status=str(status),
    )
