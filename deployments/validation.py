"""Checks of node addresses against the operator's settings (allowed networks)."""

from django.conf import settings

from integrations.targets import (
    Network,
    TargetError,
    host_port,
    http_base_url,
    http_url,
    parse_networks,
)


def allowed_networks() -> tuple[Network, ...]:
    """The networks targets must lie in (SWITCHYARD_ALLOWED_TARGET_NETWORKS); () = any."""
    return parse_networks(getattr(settings, "SWITCHYARD_ALLOWED_TARGET_NETWORKS", ""))


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
