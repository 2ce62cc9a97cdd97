"""The cluster's router as releases see it: one driver per cluster, state built from the
active releases (each pins its model's unversioned traffic to explicit versions)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from deployments.locks import advisory_lock
from deployments.models import TritonCluster, TritonNode
from deployments.push import client_for
from deployments.selectors import desired_state
from integrations.routers import ModelRoute, RouterDriver, RouterState, get_driver
from integrations.triton.errors import TritonError

_DRIVERS: dict[str, RouterDriver] = {}
ROUTER_LOCK_NAMESPACE = 7303  # advisory lock key space of router changes, one per cluster


@contextmanager
def router_changing(cluster: TritonCluster) -> Iterator[None]:
    """Hold the cluster's router lock: read what it serves, build the next state, apply it.

    Release ticks (one lock per release) and the node sync would otherwise overwrite each
    other's change with a state read just before it.
    """
    with advisory_lock(ROUTER_LOCK_NAMESPACE, cluster.pk, wait=True):
        yield


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
    return RouterState(upstreams=_node_urls(cluster), routes=routes)


def _node_urls(cluster: TritonCluster) -> list[str]:
    return [n.http_url for n in cluster.nodes.all()]


def router_sync(cluster: TritonCluster) -> bool:
    """Point a running router at the cluster's nodes as they are now; True when it changed.

    A node the router does not send to yet joins once reconcile has seen it up and it has
    every version the cluster must serve loaded (so it gets no traffic while empty, nor
    after a failed repair); a node no longer in the cluster (or whose URL changed) gets
    none. The routes nginx serves stay as they are. A router that is not running is left
    alone: whoever starts it (run_router, a release) applies the whole state.
    """
    if cluster.router.get("driver") != "nginx":
        return False
    router = router_for(cluster)
    with router_changing(cluster):
        live = router.current()
        if live is None:
            return False
        serving = set(live.upstreams)
        desired = desired_state(cluster=cluster)
        nodes = [
            n.http_url
            for n in cluster.nodes.all()
            if n.http_url in serving or (n.health == TritonNode.Health.UP and _serves(n, desired))
        ]
        if live.upstreams == nodes:
            return False
        router.apply(RouterState(upstreams=nodes, routes=live.routes))
    return True


def _serves(node: TritonNode, desired: dict[str, list[int]]) -> bool:
    """True when the node has every desired version loaded (False when it cannot say)."""
    try:
        with client_for(node) as client:
            loaded = client.loaded_models()
    except TritonError:
        return False
    return all(
        {str(v) for v in versions} <= loaded.get(model, set())
        for model, versions in desired.items()
    )
