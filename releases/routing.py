"""The cluster's router as releases see it: one driver per cluster, state built from the
active releases (each pins its model's unversioned traffic to explicit versions)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from deployments import locks
from deployments.models import TritonCluster, TritonNode
from deployments.push import client_for
from deployments.selectors import desired_state
from deployments.validation import cluster_router, router_dir
from integrations.paths import PathError
from integrations.routers import ModelRoute, RouterDriver, RouterState, get_driver
from integrations.routers.settings import RouterSettingsError
from integrations.triton.errors import TritonError

_DRIVERS: dict[str, RouterDriver] = {}


@contextmanager
def router_changing(cluster: TritonCluster) -> Iterator[None]:
    """Hold the cluster's router lock: read what it serves, build the next state, apply it.

    Release ticks (one lock per release) and the node sync would otherwise overwrite each
    other's change with a state read just before it.
    """
    with locks.advisory_lock(locks.ROUTER_CHANGE, cluster.pk, wait=True):
        yield


def router_prefix(cluster: TritonCluster) -> Path:
    """The router's folder, checked under SWITCHYARD_ROUTER_ROOTS (RouterSettingsError)."""
    prefix = cluster_router(cluster).prefix_dir or str(
        Path(settings.SWITCHYARD_VAR_DIR) / "routers" / cluster.name
    )
    try:
        return router_dir(prefix)
    except PathError as exc:
        raise RouterSettingsError(str(exc), "router.prefix_dir") from None


def router_for(cluster: TritonCluster) -> RouterDriver:
    """The driver of a cluster's router (`none` when none is configured).

    Raises RouterSettingsError (a RouterError) when the stored settings are unusable, so
    the caller refuses this cluster and goes on with the others.
    """
    router = cluster_router(cluster)
    key = f"{cluster.pk}:{router.driver}:{router.listen}:{router.prefix_dir}"
    if key not in _DRIVERS:
        if router.driver == "nginx":
            prefix = str(router_prefix(cluster))
            _DRIVERS[key] = get_driver("nginx", prefix_dir=prefix, listen=router.listen)
        else:
            _DRIVERS[key] = get_driver("none")
    return _DRIVERS[key]


def router_driver_name(cluster: TritonCluster) -> str:
    """'nginx' or 'none'; 'none' also for settings that no longer parse (nothing to run)."""
    try:
        return cluster_router(cluster).driver
    except RouterSettingsError:
        return "none"


def access_log_path(cluster: TritonCluster) -> Path | None:
    """The nginx router's access log; None without one (or with unusable settings: the
    tick's effects report those when they apply the router)."""
    if router_driver_name(cluster) != "nginx":
        return None
    try:
        return router_prefix(cluster) / "logs" / "access.log"
    except RouterSettingsError:
        return None


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
    if cluster_router(cluster).driver != "nginx":  # unusable settings: RouterSettingsError
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
