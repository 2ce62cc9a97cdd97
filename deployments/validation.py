"""A cluster's and a node's settings checked against the operator's settings (allowed
networks, folder roots): the same parse at the API and wherever the settings are used."""

from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from integrations.metrics_source import MetricsSettings, parse_metrics
from integrations.paths import SafeDir, path_under_roots
from integrations.routers.settings import RouterSettings, parse_router
from integrations.targets import (
    Address,
    Network,
    TargetError,
    endpoints_of,
    host_port,
    http_base_url,
    http_url,
    parse_networks,
)
from integrations.triton.inputs import TensorLimits


def allowed_networks() -> tuple[Network, ...]:
    """The networks targets must lie in (SWITCHYARD_ALLOWED_TARGET_NETWORKS); () = public
    addresses only."""
    return parse_networks(getattr(settings, "SWITCHYARD_ALLOWED_TARGET_NETWORKS", ""))


DEFAULT_PORTS = {"redis": 6379, "rediss": 6379, "amqp": 5672, "amqps": 5671}


def _url_host_port(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 6379)
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None


def own_service_endpoints() -> frozenset[tuple[Address, int]]:
    """(address, port) of the control plane's own database, Redis, cache and broker: never a
    target on a user's say-so, whatever the allowed networks admit."""
    database = settings.DATABASES["default"]
    pairs = []
    if database.get("HOST") and not str(database["HOST"]).startswith("/"):
        pairs.append((str(database["HOST"]), int(database.get("PORT") or 5432)))
    cache = settings.CACHES.get("default", {}).get("LOCATION", "")
    locations = cache if isinstance(cache, list | tuple) else [cache]
    urls = [settings.REDIS_URL, getattr(settings, "CELERY_BROKER_URL", ""), *locations]
    pairs += [pair for url in urls if url and (pair := _url_host_port(str(url)))]
    return endpoints_of(pairs)


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


def repository_open(path: str) -> SafeDir:
    """The shared model repository folder, checked under SWITCHYARD_REPOSITORY_ROOTS and
    opened without following links (PathError otherwise): writes and removals go through it."""
    return SafeDir.open_under(path, settings.SWITCHYARD_REPOSITORY_ROOTS)


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
