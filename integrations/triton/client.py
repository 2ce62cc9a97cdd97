"""A typed wrapper over tritonclient for what the control plane needs (docs/TRITON.md).

* Model control (load, unload) goes over gRPC with a long timeout: a load sent over HTTP
  stalls the inference keep-alive connections that share its server thread (measured here).
  Everything else goes over HTTP with short timeouts, except that readiness and inference
  can be asked `via_grpc` to reuse the channel a load just opened (a push: load, READY,
  warm-up, one connection). The HTTP connection is only opened when first used.
* Every call has a timeout: a python version dir without model.py makes a load hang forever
  (docs/TRITON.md §api), so `load` also refuses such a push before sending it.
* Readiness is judged per model, never by /v2/health/ready, which answers 400 during every
  unload window and after any failed load (§versions).
* Pushed models (files uploaded with the load) are not in the repository index; the stats
  endpoint lists every loaded model, pushed ones included (§api).
* Every failure is a TransientTritonError or PermanentTritonError (errors.py).
* Calls to a restricted API (load, unload, the repository index) carry the node key's
  header when the client has one (`node_key`, restricted.py); other calls never do.

Always close the client (or use it as a context manager): an open keep-alive connection makes
the server's shutdown wait about 30 s. Not thread safe, like tritonclient's HTTP client.
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import np_to_triton_dtype

from integrations.triton.errors import (
    TRANSPORT_ERRORS,
    PermanentTritonError,
    TransientTritonError,
    TritonError,
    action,
    translate,
)
from integrations.triton.model_config import WARMUP_FOLDER
from integrations.triton.restricted import NodeKey

POLL_INTERVAL_S = 0.1
FIRST_POLL_INTERVAL_S = 0.005
ACTIVE_STATES = frozenset({"LOADING", "READY", "UNLOADING"})


@dataclass(frozen=True)
class ServerInfo:
    """What GET /v2 says about the server."""

    version: str
    extensions: tuple[str, ...]


@dataclass(frozen=True)
class IndexEntry:
    """One row of the repository index; a never-loaded model has only a name."""

    name: str
    version: str | None = None
    state: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class InferResult:
    """Outputs by name, the version that answered, and the client-side round trip."""

    outputs: dict[str, np.ndarray]
    model_version: str
    latency_ms: float


class TritonClient:
    """One Triton node: HTTP for reads and inference, gRPC for load and unload."""

    def __init__(
        self,
        http_url: str,
        grpc_url: str | None = None,
        *,
        timeout_s: float = 10.0,
        load_timeout_s: float = 120.0,
        metrics_url: str | None = None,
        node_key: NodeKey | None = None,
    ) -> None:
        parts = urlsplit(http_url if "://" in http_url else f"http://{http_url}")
        host = parts.hostname or "127.0.0.1"
        http_port = parts.port or 8000
        self.node = f"{parts.scheme}://{host}:{http_port}"
        # Triton's defaults put gRPC on the port after HTTP (8000/8001), as local.py does.
        self.grpc_url = (grpc_url or f"{host}:{http_port + 1}").removeprefix("grpc://")
        self.metrics_url = metrics_url
        self.timeout_s = timeout_s
        self.load_timeout_s = load_timeout_s
        self._http_address = f"{host}:{http_port}"
        self._is_https = parts.scheme == "https"
        self._http_client: httpclient.InferenceServerClient | None = None
        self._grpc = grpcclient.InferenceServerClient(self.grpc_url)
        self._closed = False
        self._key = node_key

    def _http_key(self) -> dict[str, str] | None:
        return self._key.http_headers() if self._key else None

    def _grpc_key(self) -> dict[str, str] | None:
        return self._key.grpc_headers() if self._key else None

    @property
    def _http(self) -> httpclient.InferenceServerClient:
        if self._http_client is None:
            self._http_client = httpclient.InferenceServerClient(
                self._http_address,
                connection_timeout=self.timeout_s,
                network_timeout=self.timeout_s,
                ssl=self._is_https,
            )
        return self._http_client

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close both connections (idempotent); open ones delay the server's shutdown."""
        if not self._closed:
            self._closed = True
            if self._http_client is not None:
                self._http_client.close()
            self._grpc.close()

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _calling(self, operation: str, model: str | None = None) -> Iterator[None]:
        try:
            yield
        except TritonError:
            raise
        except TRANSPORT_ERRORS as exc:
            raise translate(exc, node=self.node, operation=operation, model=model) from exc

    # ------------------------------------------------------------------ reads (HTTP)

    def is_live(self) -> bool:
        """True when the node answers /v2/health/live; False when it says no or is unreachable."""
        try:
            with self._calling("is_live"):
                return bool(self._http.is_server_live())
        except TransientTritonError:
            return False

    def model_ready(
        self, model: str, version: str | int | None = None, *, via_grpc: bool = False
    ) -> bool:
        """True when `model` (or that version) is READY; unreachable raises TransientTritonError."""
        with self._calling("model_ready", model):
            if via_grpc:
                return bool(
                    self._grpc.is_model_ready(
                        model, _version(version), client_timeout=self.timeout_s
                    )
                )
            return bool(self._http.is_model_ready(model, _version(version)))

    def server_metadata(self) -> ServerInfo:
        """The server's version and protocol extensions."""
        with self._calling("server_metadata"):
            meta = self._http.get_server_metadata()
        return ServerInfo(
            version=str(meta["version"]), extensions=tuple(meta.get("extensions", []))
        )

    def repository_index(self) -> list[IndexEntry]:
        """Models of the node's repository dirs with state and reason (pushed models are absent)."""
        with self._calling("repository_index"):
            rows = self._http.get_model_repository_index(headers=self._http_key())
        return [
            IndexEntry(
                name=row["name"],
                version=row.get("version"),
                state=row.get("state"),
                reason=row.get("reason"),
            )
            for row in rows
        ]

    def model_config(self, model: str, version: str | int | None = None) -> dict[str, Any]:
        """The config Triton serves `model` with, as a dict (proto field names)."""
        with self._calling("model_config", model):
            return self._http.get_model_config(model, _version(version))

    def statistics(self, model: str | None = None, version: str | int | None = None) -> list[dict]:
        """Per-version inference statistics; every loaded model when `model` is None."""
        with self._calling("statistics", model):
            answer = self._http.get_inference_statistics(model or "", _version(version))
        return list(answer.get("model_stats", []))

    def loaded_models(self) -> dict[str, set[str]]:
        """Loaded model names -> their loaded versions, pushed models included (from stats)."""
        loaded: dict[str, set[str]] = {}
        for row in self.statistics():
            loaded.setdefault(row["name"], set()).add(str(row["version"]))
        return loaded

    # ------------------------------------------------------------------ model control (gRPC)

    def load(
        self,
        model: str,
        *,
        config_json: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """Load or reload `model`; returns once Triton says it loaded, raises if it did not.

        `files` maps "<version>/<relpath>" (and a native warm-up's "warmup/<file>") to bytes
        and forms the whole model dir (it needs `config_json`). Same files and identical
        config is a silent no-op on the server: put something that changes (e.g. a PUSH_ID
        parameter) into the config to push new bytes.
        """
        payload = self._override_files(model, config_json, files)
        with self._calling("load", model):
            self._grpc.load_model(
                model,
                config=config_json,
                files=payload,
                headers=self._grpc_key(),
                client_timeout=self.load_timeout_s,
            )

    def unload(self, model: str, *, unload_dependents: bool = False) -> None:
        """Ask Triton to unload `model`; new requests fail at once, in-flight ones finish."""
        with self._calling("unload", model):
            self._grpc.unload_model(
                model,
                unload_dependents=unload_dependents,
                headers=self._grpc_key(),
                client_timeout=self.timeout_s,
            )

    def wait_ready(
        self,
        model: str,
        versions: Iterable[str | int] | None = None,
        timeout_s: float = 60.0,
        *,
        via_grpc: bool = False,
    ) -> None:
        """Return once every version in `versions` (default: the model) is READY, else raise."""
        if isinstance(versions, str | int):
            versions = [versions]
        pending = [_version(v) for v in versions or ()] or [""]
        deadline = time.monotonic() + timeout_s
        interval = FIRST_POLL_INTERVAL_S
        while True:
            pending = [v for v in pending if not self.model_ready(model, v, via_grpc=via_grpc)]
            if not pending:
                return
            if time.monotonic() >= deadline:
                detail = self._index_detail(model, pending)
                raise TransientTritonError(
                    f"Could not {action('wait_ready', model)} on Triton node {self.node}: "
                    f"{_describe_versions(pending)} not ready after {timeout_s:g} s{detail}.",
                    node=self.node,
                    operation="wait_ready",
                    model=model,
                )
            # Short first sleeps: a version that is not READY yet usually is a moment later.
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
            interval = min(interval * 2, POLL_INTERVAL_S)

    def wait_unloaded(self, model: str, timeout_s: float = 30.0) -> None:
        """Return once no version of `model` is loaded, loading or draining, else raise.

        Stats and readiness drop a model the moment unload is called; the index (disk models)
        and, when `metrics_url` is set, the metrics (all models) also show the drain.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            busy = self._still_loaded(model)
            if not busy:
                return
            if time.monotonic() >= deadline:
                raise TransientTritonError(
                    f"Could not {action('wait_unloaded', model)} on Triton node {self.node}: "
                    f"after {timeout_s:g} s it still shows {', '.join(busy)}.",
                    node=self.node,
                    operation="wait_unloaded",
                    model=model,
                )
            time.sleep(POLL_INTERVAL_S)

    # ------------------------------------------------------------------ inference (HTTP)

    def infer(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        version: str | int | None = None,
        outputs: Iterable[str] | None = None,
        *,
        via_grpc: bool = False,
    ) -> InferResult:
        """One inference request; returns every output (or those named) as numpy arrays."""
        if via_grpc:
            return self._infer_grpc(model, inputs, version, outputs)
        tensors = [_infer_input(name, array) for name, array in inputs.items()]
        requested = [httpclient.InferRequestedOutput(n, binary_data=True) for n in outputs or ()]
        started = time.perf_counter()
        with self._calling("infer", model):
            result = self._http.infer(
                model, tensors, model_version=_version(version), outputs=requested or None
            )
        latency_ms = (time.perf_counter() - started) * 1000.0
        response = result.get_response()
        names = [row["name"] for row in response.get("outputs", [])]
        return InferResult(
            outputs={name: result.as_numpy(name) for name in names},
            model_version=str(response.get("model_version", "")),
            latency_ms=latency_ms,
        )

    def _infer_grpc(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        version: str | int | None,
        outputs: Iterable[str] | None,
    ) -> InferResult:
        tensors = [_infer_input(name, array, grpcclient) for name, array in inputs.items()]
        requested = [grpcclient.InferRequestedOutput(n) for n in outputs or ()]
        started = time.perf_counter()
        with self._calling("infer", model):
            result = self._grpc.infer(
                model,
                tensors,
                model_version=_version(version),
                outputs=requested or None,
                client_timeout=self.timeout_s,
            )
        latency_ms = (time.perf_counter() - started) * 1000.0
        response = result.get_response()
        return InferResult(
            outputs={row.name: result.as_numpy(row.name) for row in response.outputs},
            model_version=str(response.model_version),
            latency_ms=latency_ms,
        )

    # ------------------------------------------------------------------ helpers

    def _override_files(
        self, model: str, config_json: str | None, files: Mapping[str, bytes] | None
    ) -> dict[str, bytes] | None:
        """The `file:` parameters for a push, refusing pushes Triton would reject or hang on."""
        if not files:
            return None
        if config_json is None:
            raise ValueError("Pushing files needs config_json: Triton builds the dir from both.")
        payload = {}
        for key, content in files.items():
            path = key.removeprefix("file:")
            folder, _, relpath = path.partition("/")
            if not (folder.isdigit() or folder == WARMUP_FOLDER) or not relpath:
                raise ValueError(
                    f"File key {key!r} is not '<version>/<relative path>' or "
                    f"'{WARMUP_FOLDER}/<file>'."
                )
            payload[f"file:{path}"] = bytes(content)
        self._refuse_python_dir_without_entry(model, config_json, payload)
        return payload

    def _refuse_python_dir_without_entry(
        self, model: str, config_json: str, payload: Mapping[str, bytes]
    ) -> None:
        try:
            config = json.loads(config_json)
        except json.JSONDecodeError as exc:
            raise self._refused(model, f"config_json is not valid JSON ({exc})") from exc
        if config.get("backend") != "python":
            return
        entry = config.get("default_model_filename") or "model.py"
        folders = {key.removeprefix("file:").split("/", 1)[0] for key in payload}
        versions = {f for f in folders if f.isdigit()}
        missing = sorted(v for v in versions if f"file:{v}/{entry}" not in payload)
        if missing:
            raise self._refused(
                model,
                f"python version dir(s) {', '.join(missing)} have no {entry}, and Triton "
                "would hang on this load forever",
            )

    def _refused(self, model: str, why: str) -> PermanentTritonError:
        return PermanentTritonError(
            f"Could not {action('load', model)} on Triton node {self.node}: {why}.",
            node=self.node,
            operation="load",
            model=model,
        )

    def _still_loaded(self, model: str) -> list[str]:
        busy = [f"version {v} loaded" for v in sorted(self.loaded_models().get(model, ()))]
        busy += [
            f"version {row.version} {row.state}"
            for row in self.repository_index()
            if row.name == model and row.state in ACTIVE_STATES
        ]
        if self.metrics_url and self._has_metric_series(model):
            busy.append("metric series (still draining)")
        return busy

    def _has_metric_series(self, model: str) -> bool:
        """True while /metrics counts inferences of `model`: the series go when the unload ends."""
        parts = urlsplit(self.metrics_url or "")
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout_s)
        try:
            with self._calling("metrics", model):
                conn.request("GET", parts.path or "/metrics")
                text = conn.getresponse().read().decode("utf-8", "replace")
        finally:
            conn.close()
        # nv_inference_request_failure series outlive the unload (seen on 2.51); this one does not.
        pattern = rf'^nv_inference_count{{(?:[^}}]*,)?model="{re.escape(model)}"[,}}]'
        return re.search(pattern, text, re.MULTILINE) is not None

    def _index_detail(self, model: str, versions: list[str]) -> str:
        rows = [
            row
            for row in self.repository_index()
            if row.name == model and (row.version in versions or versions == [""])
        ]
        states = [f"version {r.version} {r.state}: {r.reason}" for r in rows if r.reason]
        return f" (index: {'; '.join(states)})" if states else ""


def _version(version: str | int | None) -> str:
    return "" if version is None else str(version)


def _describe_versions(versions: list[str]) -> str:
    if versions == [""]:
        return "the model is"
    return f"version(s) {', '.join(versions)} are"


def _infer_input(name: str, array: np.ndarray, protocol: Any = httpclient) -> Any:
    """`name` as an InferInput of `protocol` (tritonclient.http or tritonclient.grpc)."""
    array = np.asarray(array)
    if array.dtype.kind in "US":  # str/bytes arrays travel as BYTES
        array = array.astype(np.object_)
    datatype = np_to_triton_dtype(array.dtype)
    if datatype is None:
        raise ValueError(f"Input {name!r} has dtype {array.dtype}, which Triton cannot take.")
    tensor = protocol.InferInput(name, list(array.shape), datatype)
    if protocol is httpclient:
        tensor.set_data_from_numpy(array, binary_data=True)
    else:
        tensor.set_data_from_numpy(array)
    return tensor
