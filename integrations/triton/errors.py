"""Triton failures in two kinds: worth retrying later (transient) or not (permanent).

`translate` maps what tritonclient and the network raise onto these classes. Status codes
and messages are those measured on Triton 2.51 (docs/TRITON.md, §api):

* transient: connection refused/reset/closed, timeouts (socket or gRPC deadline), HTTP 503
  (e.g. a pinned version not yet ready) and gRPC UNAVAILABLE, plus the 408/429/502/504 a
  proxy in front of a node may answer;
* permanent: everything else the server answers, e.g. 400 `load failed ...` (initialize
  raised, bad dims), 404 unknown model/version, 500 `failed to poll from model repository`
  (invalid config), gRPC INVALID_ARGUMENT / NOT_FOUND / INTERNAL, and client-side errors;
* permanent too: a restricted API called without the node's key (HTTP 403, and gRPC
  UNAVAILABLE "This protocol is restricted": unavailable, but no retry will pass).
"""

from __future__ import annotations

import http.client
import re

import grpc
from tritonclient.utils import InferenceServerException

from integrations.triton.restricted import is_key_refusal

# What a call to a node may raise that `translate` understands; anything else is a bug.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    InferenceServerException,
    OSError,  # refused, reset, broken pipe, DNS, socket timeout (TimeoutError)
    http.client.HTTPException,  # geventhttpclient's HTTPConnectionClosed / parse errors
    grpc.RpcError,
)

TRANSIENT_STATUSES = frozenset(
    {
        "408",
        "429",
        "502",
        "503",
        "504",
        "StatusCode.UNAVAILABLE",
        "StatusCode.DEADLINE_EXCEEDED",
        "StatusCode.RESOURCE_EXHAUSTED",
        "StatusCode.ABORTED",
        "StatusCode.CANCELLED",
    }
)

# How each client operation reads in a sentence ("Could not <action> on Triton node ...").
_ACTIONS = {
    "is_live": "check liveness",
    "model_ready": "check readiness of model {m}",
    "server_metadata": "read the server metadata",
    "repository_index": "read the repository index",
    "model_config": "read the config of model {m}",
    "statistics": "read statistics",
    "loaded_models": "list the loaded models",
    "load": "load model {m}",
    "unload": "unload model {m}",
    "wait_ready": "see model {m} ready",
    "wait_unloaded": "see model {m} unloaded",
    "infer": "run inference on model {m}",
    "metrics": "read metrics",
    "probe": "read the state of model {m}",
}

_POLL_FAILED_HINT = (
    " (the config or file layout is invalid: name mismatch, unknown field, bad JSON or no "
    "config with files; the exact cause is only in the server log)"
)


_KEY_HINT = (
    " (the node restricts this API to callers with its key: set the cluster's api_key or "
    "api_key_ref to the key the node was started with)"
)


class TritonError(Exception):
    """A call to a Triton node failed; `.node` and `.operation` say where and what."""

    def __init__(
        self,
        message: str,
        *,
        node: str,
        operation: str,
        model: str | None = None,
        status: str | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.node = node
        self.operation = operation
        self.model = model
        self.status = status  # "400" (HTTP) or "StatusCode.X" (gRPC); None for network errors
        self.reason = reason  # the server's own text, Python traceback included


class TransientTritonError(TritonError):
    """The node was unreachable, too slow or busy: the same call may succeed later."""


class PermanentTritonError(TritonError):
    """The node refused the request: retrying it unchanged will fail again."""


def action(operation: str, model: str | None = None) -> str:
    """The operation as a phrase for messages, e.g. "load model 'risk_score'"."""
    template = _ACTIONS.get(operation, operation)
    if model is None:
        return template.replace(" of model {m}", "").replace(" model {m}", " a model")
    phrase = template.format(m=repr(model))
    return phrase if "{m}" in template else f"{phrase} of model {model!r}"


def translate(
    exc: BaseException, *, node: str, operation: str, model: str | None = None
) -> TritonError:
    """The TritonError subclass and message for an exception raised by a call to `node`."""
    if isinstance(exc, InferenceServerException):
        status, reason = exc.status(), exc.message() or str(exc)
    elif isinstance(exc, grpc.RpcError):
        status, reason = str(exc.code()), exc.details() or str(exc)
    else:
        status, reason = None, _network_reason(exc)
    transient = status is None or status in TRANSIENT_STATUSES
    if isinstance(exc, InferenceServerException) and status is None:
        transient = False  # raised by tritonclient itself before sending: a caller error
    if is_key_refusal(reason):
        transient = False
    summary = _summary(reason, model)
    label = _status_label(status)
    message = f"Could not {action(operation, model)} on Triton node {node}{label}: {summary}."
    if operation == "load" and status == "StatusCode.DEADLINE_EXCEEDED":
        message += (
            " The node may still be loading it, or be stuck for good: a python version dir "
            "without model.py never finishes loading."
        )
    details = reason.strip().rstrip(";").strip()
    if "\n" in details:  # e.g. the Python traceback of a failed initialize()
        message += f"\nServer reason: {details}"
    kind = TransientTritonError if transient else PermanentTritonError
    return kind(message, node=node, operation=operation, model=model, status=status, reason=reason)


def _network_reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused, nothing listens on that port (is the server running?)"
    if isinstance(exc, TimeoutError):
        return "no answer within the client timeout"
    if isinstance(exc, ConnectionResetError | BrokenPipeError | http.client.HTTPException):
        return f"the connection was dropped ({exc or type(exc).__name__})"
    return str(exc) or type(exc).__name__


def _status_label(status: str | None) -> str:
    if status is None:
        return ""
    if status.startswith("StatusCode."):
        return f" (gRPC {status.removeprefix('StatusCode.')})"
    return f" (HTTP {status})"


def _summary(reason: str, model: str | None) -> str:
    """The first line of the server's reason, without what the sentence already says."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    first = lines[0].rstrip(";").strip() if lines else "no reason given"
    if model is not None:
        first = first.removeprefix(f"load failed for model '{model}': ")
    if "Deadline Exceeded" in first:
        first = "no answer within the client timeout (Deadline Exceeded)"
    if "failed to poll from model repository" in first:
        first += _POLL_FAILED_HINT
    if is_key_refusal(first):
        first += _KEY_HINT
    return re.sub(r"\.+$", "", first)
