"""A cluster's and a node's settings checked against the operator's settings (allowed
networks, folder roots): the same parse at the API and wherever the settings are used."""

from pathlib import Path

from django.conf import settings

from integrations.metrics_source import MetricsSettings, parse_metrics
from integrations.paths import path_under_roots
from integrations.routers.settings import RouterSettings, parse_router
from integrations.targets import (
    Network,
    TargetError,
    host_port,
    http_base_url,
    http_url,
    parse_networks,
)
from integrations.triton.inputs import TensorLimits


def allowed_networks() -> tuple[Network, ...]:
    """The networks targets must lie in (SWITCHYARD_ALLOWED_TARGET_NETWORKS); () = any."""
    return parse_networks(getattr(settings, "SWITCHYARD_ALLOWED_TARGET_NETWORKS", ""))


def cluster_router(cluster) -> RouterSettings:
    """The cluster's router settings, parsed; RouterSettingsError when they are unusable."""
    return parse_router(
        cluster.router, networks=allowed_networks(), roots=settings.SWITCHYARD_ROUTER_ROOTS
    )


def cluster_metrics(cluster) -> MetricsSettings:
    """The cluster's metrics source, parsed; MetricsSettingsError when it is unusable."""
    return parse_metrics(cluster.metrics, networks=allowed_networks())


def repository_dir(path: str) -> Path:
    """A shared model repository folder, resolved under SWITCHYARD_REPOSITORY_ROOTS
    (PathError otherwise): checked when stored and before each write or removal."""
    return path_under_roots(path, settings.SWITCHYARD_REPOSITORY_ROOTS)


def router_dir(path: str) -> Path:
    """A router prefix folder, resolved under SWITCHYARD_ROUTER_ROOTS (PathError otherwise)."""
    return path_under_roots(path, settings.SWITCHYARD_ROUTER_ROOTS)


def node_urls_check(*, http: str, grpc: str = "", metrics: str = "") -> dict[str, str]:
    """{field: message} for every unusable node address; empty when all are fine."""
    networks = allowed_networks()
    checks = {
        "http_url": (http, lambda v: http_base_url(v, networks)),
        "grpc_url": (grpc, lambda v: host_port(v, networks)),
        "metrics_url": (metrics, lambda v: http_url(v, networks)),
    }
    errors = {}
    for field, (value, check) in checks.items():
        if field != "http_url" and value == "":
            continue
        try:
            check(value)
        except TargetError as exc:
            errors[field] = str(exc)
    return errors


def tensor_limits() -> TensorLimits:
    """How large a request the web process or a worker may build (settings)."""
    return TensorLimits(
        max_elements=settings.SWITCHYARD_MAX_TENSOR_ELEMENTS,
        max_bytes=settings.SWITCHYARD_MAX_REQUEST_BYTES,
    )
