"""A cluster's router settings (`TritonCluster.router`), typed: the one parser the API, the
router drivers, run_router and the release tick all read them through.

Known keys per driver only, each with its type and range; a stored value that no longer
parses (written before these checks, or straight to the database) makes the consumer
refuse that cluster with a RouterSettingsError, never crash a loop. Plain Python.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from integrations.paths import PathError, path_under_roots
from integrations.routers.base import RouterError
from integrations.routers.nginx import _UNSAFE_PATH_CHARS, parse_listen
from integrations.targets import Network, TargetError, http_base_url

DRIVERS = ("nginx", "none")
KEYS = {
    "none": ("driver", "url"),
    "nginx": ("driver", "url", "listen", "grpc_listen", "prefix_dir"),
}


class RouterSettingsError(RouterError):
    """Unusable router settings; `field` names the key as the API shows it (`router.url`)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class RouterSettings:
    """driver: nginx or none; url: where clients send inference (http(s)://host:port);
    listen: nginx's loopback address; grpc_listen: its gRPC (http2) loopback address, '' for
    none (gRPC is passed through, never split); prefix_dir: nginx's folder ('' = default)."""

    driver: str = "none"
    url: str = ""
    listen: str = ""
    prefix_dir: str = ""
    grpc_listen: str = ""

    def to_json(self) -> dict[str, str]:
        """What is stored: the driver and the keys that are set."""
        keys = KEYS[self.driver]
        return {k: getattr(self, k) for k in keys if k == "driver" or getattr(self, k)}


def parse_router(
    data: Any, *, networks: Sequence[Network] = (), roots: Iterable[str | os.PathLike] = ()
) -> RouterSettings:
    """RouterSettings from a stored or submitted dict, or RouterSettingsError naming the key.

    An empty dict means no router. `networks` is the allowed-target list for `url`; `roots`
    the folders `prefix_dir` must lie in.
    """
    if data is None or data == {}:
        return RouterSettings()
    if not isinstance(data, dict):
        raise RouterSettingsError('Must be an object such as {"driver": "none"}.', "router")
    driver = data.get("driver", "none")
    if driver not in DRIVERS:
        raise RouterSettingsError(f"Unknown driver {driver!r}; use nginx or none.", "router.driver")
    for key, value in data.items():
        if key not in KEYS[driver]:
            raise RouterSettingsError(f"Unknown key for the {driver} driver.", f"router.{key}")
        if not isinstance(value, str):
            raise RouterSettingsError("Must be a string.", f"router.{key}")
    settings = RouterSettings(**data)
    _check_url(settings.url, networks)
    if driver == "nginx":
        _check_nginx(settings, roots)
    return settings


def _check_url(url: str, networks: Sequence[Network]) -> None:
    if not url:
        return
    try:
        http_base_url(url, networks)
    except TargetError as exc:
        raise RouterSettingsError(str(exc), "router.url") from None


def _check_nginx(settings: RouterSettings, roots: Iterable[str | os.PathLike]) -> None:
    if not settings.listen:
        raise RouterSettingsError("The nginx driver needs 127.0.0.1:<port>.", "router.listen")
    try:
        parse_listen(settings.listen)
    except RouterError as exc:
        raise RouterSettingsError(exc.message, "router.listen") from None
    if settings.grpc_listen:
        try:
            parse_listen(settings.grpc_listen)
        except RouterError as exc:
            raise RouterSettingsError(exc.message, "router.grpc_listen") from None
        if settings.grpc_listen == settings.listen:
            raise RouterSettingsError(
                "Must be another port than router.listen (gRPC has a listener of its own).",
                "router.grpc_listen",
            )
    if not settings.prefix_dir:
        return
    if _UNSAFE_PATH_CHARS & set(settings.prefix_dir):
        raise RouterSettingsError(
            "Must be a plain path (no quotes, $, ;, braces).", "router.prefix_dir"
        )
    try:
        path_under_roots(settings.prefix_dir, roots)
    except PathError as exc:
        raise RouterSettingsError(str(exc), "router.prefix_dir") from None
