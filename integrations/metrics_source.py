"""Where a cluster's metrics come from (`TritonCluster.metrics`), typed: the one parser the
API and the telemetry collector read it through. Plain Python."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from integrations.targets import Network, TargetError, http_url


class MetricsSettingsError(ValueError):
    """Unusable metrics settings; `field` names the key as the API shows it (`metrics.url`)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message, self.field = message, field


@dataclass(frozen=True)
class MetricsSettings:
    """source: scrape (each node's metrics URL) or prometheus (needs `url`)."""

    source: str = "scrape"
    url: str = ""

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, **({"url": self.url} if self.url else {})}


def parse_metrics(data: Any, *, networks: Sequence[Network] = ()) -> MetricsSettings:
    """MetricsSettings from a stored or submitted dict, or MetricsSettingsError naming the key."""
    if data is None or data == {}:
        return MetricsSettings()
    if not isinstance(data, dict):
        raise MetricsSettingsError('Must be an object such as {"source": "scrape"}.', "metrics")
    for key, value in data.items():
        if key not in ("source", "url"):
            raise MetricsSettingsError("Unknown key; use source and url.", f"metrics.{key}")
        if not isinstance(value, str):
            raise MetricsSettingsError("Must be a string.", f"metrics.{key}")
    settings = MetricsSettings(**data)
    if settings.source not in ("scrape", "prometheus"):
        raise MetricsSettingsError("Use scrape or prometheus.", "metrics.source")
    if settings.source == "prometheus" and not settings.url:
        raise MetricsSettingsError("Prometheus needs its URL.", "metrics.url")
    if settings.url:
        try:
            http_url(settings.url, networks)
        except TargetError as exc:
            raise MetricsSettingsError(str(exc), "metrics.url") from None
    return settings
