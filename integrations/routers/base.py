"""The traffic-router interface: desired split per model, the driver protocol, its errors.

A router sits in front of a cluster's Triton nodes and splits each released model's
*unversioned* inference traffic (`POST /v2/models/<m>/infer`) across explicit versions,
because Triton itself answers that URL with the highest READY version (docs/TRITON.md §versions).
Other inference, readiness and metadata calls pass through untouched, gRPC too (its own
listener): a gRPC request's version is inside its protobuf body, which nginx cannot read, so
gRPC is never split. The rest of Triton's API (repository, model control, shared memory,
trace, logging, statistics, config) is refused by the router (allowlist.py).
Plain Python, no Django.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

MODEL_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# nginx reads a sticky header as $http_<name> ('-' -> '_'): letters, digits and '-' only.
HEADER_NAME = re.compile(r"[A-Za-z0-9-]+")
MAX_HEADER_NAME = 64


class RouterError(Exception):
    """A router refused or failed an operation: `message` says what, `detail` shows why."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail.strip()

    def __str__(self) -> str:
        return f"{self.message}\n{self.detail}" if self.detail else self.message


@dataclass(frozen=True)
class ModelRoute:
    """How one model's unversioned inference traffic is split across its versions."""

    model: str
    weights: dict[int, float]  # version -> percent, sums to 100; 0 means no traffic
    sticky_header: str | None = None  # same header value -> same version; absent -> per request
    # version -> the model name that serves it, where not the model's own (a config canary's
    # candidate under a sibling name: the client calls `model`, the node serves the sibling)
    targets: dict[int, str] = field(default_factory=dict)
    # A shadow: this percent of the route's requests is also sent to `mirror_version` (its
    # target), the answer thrown away; clients get the split's answer only.
    mirror: float = 0.0
    mirror_version: int | None = None
    # Percent of the mirrored copies whose request body the router writes to its samples
    # log, for a comparer to send to both versions (a shadow's answer agreement).
    sample: float = 0.0
    # A caller's route in a graph release (an ensemble calling the released model): the
    # weights' versions are arms, the called model's versions, and every arm is served as
    # this version of its target (the caller's own, or its sibling that calls the
    # candidate). The log names the caller's version and, as `arm`, the one picked.
    served_version: int | None = None

    def __post_init__(self) -> None:
        check_route(self)

    def target(self, version: int) -> str:
        """The model name that serves `version` behind this route."""
        return self.targets.get(version, self.model)

    def live_weights(self) -> dict[int, float]:
        """The versions that get traffic, ascending, as percentages rounded to 0.01."""
        rounded = {v: round(float(w), 2) for v, w in sorted(self.weights.items())}
        return {v: w for v, w in rounded.items() if w > 0}

    def pinned_version(self) -> int | None:
        """The version that takes all traffic, or None for a weighted split."""
        live = self.live_weights()
        return next(iter(live)) if len(live) == 1 else None


@dataclass(frozen=True)
class RouterState:
    """Desired router state: the Triton nodes and the models under release."""

    upstreams: list[str]  # Triton node HTTP base URLs, e.g. "http://127.0.0.1:8000"
    routes: list[ModelRoute] = field(default_factory=list)
    # The same nodes' gRPC endpoints ("host:port"): passed through, never split by version.
    grpc_upstreams: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for url in self.upstreams:
            upstream_address(url)
        for address in self.grpc_upstreams:
            grpc_address(address)
        names = [route.model for route in self.routes]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise RouterError(f"Each model may have one route; repeated: {', '.join(duplicates)}.")

    def to_json(self) -> dict:
        """A JSON-safe dict that `from_json` turns back into an equal state."""
        return {
            "upstreams": list(self.upstreams),
            **({"grpc_upstreams": list(self.grpc_upstreams)} if self.grpc_upstreams else {}),
            "routes": [
                {
                    "model": r.model,
                    "weights": {str(v): w for v, w in sorted(r.weights.items())},
                    "sticky_header": r.sticky_header,
                    **(
                        {"targets": {str(v): n for v, n in sorted(r.targets.items())}}
                        if r.targets
                        else {}
                    ),
                    **(
                        {"mirror": r.mirror, "mirror_version": r.mirror_version} if r.mirror else {}
                    ),
                    **({"sample": r.sample} if r.sample else {}),
                    **(
                        {"served_version": r.served_version} if r.served_version is not None else {}
                    ),
                }
                for r in self.routes
            ],
        }

    @classmethod
    def from_json(cls, data: dict) -> RouterState:
        """The inverse of `to_json`."""
        routes = [
            ModelRoute(
                model=r["model"],
                weights={int(v): float(w) for v, w in r["weights"].items()},
                sticky_header=r.get("sticky_header"),
                targets={int(v): str(n) for v, n in (r.get("targets") or {}).items()},
                mirror=float(r.get("mirror") or 0.0),
                mirror_version=r.get("mirror_version"),
                sample=float(r.get("sample") or 0.0),
                served_version=r.get("served_version"),
            )
            for r in data.get("routes", [])
        ]
        return cls(
            upstreams=list(data["upstreams"]),
            routes=routes,
            grpc_upstreams=list(data.get("grpc_upstreams", [])),
        )


@dataclass(frozen=True)
class ApplyResult:
    """What `apply` did: `changed` is False when the state was already in force."""

    changed: bool
    generation: str | None = None  # the config's identity, where the driver has one
    started: bool = False  # True when apply had to start the router process


class RouterDriver(Protocol):
    name: str

    def apply(self, state: RouterState) -> ApplyResult: ...

    def current(self) -> RouterState | None: ...

    def stop(self) -> None: ...

    def rotate_logs(self, max_bytes: int) -> list[str]: ...


def check_route(route: ModelRoute) -> None:
    """Raise RouterError unless the route's name, versions, weights and header are usable."""
    if not MODEL_NAME.fullmatch(route.model or ""):
        raise RouterError(
            f"Model name {route.model!r} may only use letters, digits, '_', '.', '-'."
        )
    if route.sticky_header is not None:
        check_header_name(route.sticky_header)
    if not route.weights:
        raise RouterError(f"Route of {route.model} names no versions.")
    for version, weight in route.weights.items():
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise RouterError(f"Route of {route.model}: version {version!r} is not a positive int.")
        if not math.isfinite(weight) or weight < 0:
            raise RouterError(f"Route of {route.model}: weight {weight!r} must be 0 or more.")
    total = sum(route.weights.values())
    if abs(total - 100.0) > 0.01:
        raise RouterError(f"Route of {route.model}: weights add up to {total:g}%, not 100%.")
    mirror = route.mirror
    if isinstance(mirror, bool) or not isinstance(mirror, int | float) or not 0 <= mirror <= 100:
        raise RouterError(f"Route of {route.model}: mirror {mirror!r} must be 0..100 (percent).")
    if mirror and route.mirror_version not in route.weights:
        raise RouterError(f"Route of {route.model}: a mirror needs a routed mirror_version.")
    sample = route.sample
    if isinstance(sample, bool) or not isinstance(sample, int | float) or not 0 <= sample <= 100:
        raise RouterError(f"Route of {route.model}: sample {sample!r} must be 0..100 (percent).")
    if sample and not mirror:
        raise RouterError(f"Route of {route.model}: only mirrored copies can be sampled.")
    served = route.served_version
    if served is not None and (
        isinstance(served, bool) or not isinstance(served, int) or served < 1
    ):
        raise RouterError(
            f"Route of {route.model}: served_version {served!r} is not a positive int."
        )
    if served is not None and mirror:
        raise RouterError(f"Route of {route.model}: a caller's route cannot mirror.")
    for version, name in route.targets.items():
        if version not in route.weights or not MODEL_NAME.fullmatch(str(name or "")):
            raise RouterError(
                f"Route of {route.model}: target {name!r} of version {version!r} must name a "
                "routed version and use letters, digits, '_', '.', '-' only."
            )


def check_header_name(name: object) -> None:
    """Raise RouterError unless `name` is a header name nginx can key a sticky split on."""
    if not isinstance(name, str) or len(name) > MAX_HEADER_NAME or not HEADER_NAME.fullmatch(name):
        raise RouterError(
            f"Sticky header {str(name)[:80]!r} is not a valid header name "
            f"(letters, digits and '-', at most {MAX_HEADER_NAME} characters)."
        )


def upstream_address(url: str) -> str:
    """'http://host:port' -> 'host:port', or RouterError for anything else."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise RouterError(f"Upstream {url!r} must look like http://host:port.")
    return f"{parts.hostname}:{port}"


def grpc_address(address: str) -> str:
    """'host:port' (or 'grpc://host:port') of a node's gRPC endpoint -> 'host:port', or
    RouterError for anything else (no IPv6 literal: nginx's upstream line takes it as is)."""
    host, _, port = str(address).removeprefix("grpc://").rpartition(":")
    if not MODEL_NAME.fullmatch(host or "") or not port.isdigit() or not 0 < int(port) < 65536:
        raise RouterError(f"gRPC upstream {address!r} must look like host:port.")
    return f"{host}:{int(port)}"


def get_driver(kind: str, **settings) -> RouterDriver:
    """The router driver of that kind ("nginx" or "none") built from its settings."""
    if kind == "nginx":
        from integrations.routers.nginx import NginxRouter

        return NginxRouter(**settings)
    if kind == "none":
        from integrations.routers.none import NoRouter

        return NoRouter(**settings)
    raise RouterError(f"Unknown router kind {kind!r}; use 'nginx' or 'none'.")
