"""The cluster's router as releases see it: one driver per cluster, state built from the
active releases (each pins its model's unversioned traffic to explicit versions)."""

from pathlib import Path

from django.conf import settings

from deployments.models import TritonCluster
from integrations.routers import ModelRoute, RouterDriver, RouterState, get_driver

_DRIVERS: dict[str, RouterDriver] = {}


def router_prefix(cluster: TritonCluster) -> Path:
    return Path(
        cluster.router.get("prefix_dir") or settings.SWITCHYARD_VAR_DIR / "routers" / cluster.name
    )


def router_for(cluster: TritonCluster) -> RouterDriver:
    """The driver of a cluster's router (`none` when none is configured)."""
    kind = cluster.router.get("driver", "none")
    key = f"{cluster.pk}:{kind}:{cluster.router.get('listen', '')}"
    if key not in _DRIVERS:
        if kind == "nginx":
            _DRIVERS[key] = get_driver(
                "nginx", prefix_dir=str(router_prefix(cluster)), listen=cluster.router["listen"]
            )
        else:
            _DRIVERS[key] = get_driver("none")
    return _DRIVERS[key]


def access_log_path(cluster: TritonCluster) -> Path | None:
    if cluster.router.get("driver") != "nginx":
        return None
    return router_prefix(cluster) / "logs" / "access.log"


def route_for(release, weight: float) -> ModelRoute:
    """The release's model split: `weight`% to the candidate, the rest to the baseline."""
    baseline, candidate = release.baseline.version, release.candidate.version
    weights = {baseline: 100.0 - weight, candidate: weight}
    return ModelRoute(
        model=release.model.name, weights=weights, sticky_header=release.sticky_header or None
    )


def router_state(cluster: TritonCluster, routes: list[ModelRoute]) -> RouterState:
    return RouterState(upstreams=[n.http_url for n in cluster.nodes.all()], routes=routes)
