"""The cluster's router as releases see it: one driver per cluster, state built from the
active releases (each pins its model's unversioned traffic to explicit versions)."""

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from deployments import locks
from deployments.models import TritonCluster, TritonNode
from deployments.push import client_for
from deployments.selectors import desired_state
from deployments.validation import cluster_router, router_dir
from integrations.concurrency import fan_out
from integrations.paths import PathError
from integrations.routers import ModelRoute, RouterDriver, RouterError, RouterState, get_driver
from integrations.routers.base import grpc_address, upstream_address
from integrations.routers.settings import RouterSettingsError
from integrations.triton.errors import TritonError
from releases.models import Release
from releases.state_machine import TERMINAL

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
    key = f"{cluster.pk}:{router.driver}:{router.listen}:{router.grpc_listen}:{router.prefix_dir}"
    if key not in _DRIVERS:
        if router.driver == "nginx":
            prefix = str(router_prefix(cluster))
            _DRIVERS[key] = get_driver(
                "nginx", prefix_dir=prefix, listen=router.listen, grpc_listen=router.grpc_listen
            )
        else:
            _DRIVERS[key] = get_driver("none")
    return _DRIVERS[key]


def router_driver_name(cluster: TritonCluster) -> str:
    """'nginx' or 'none'; 'none' also for settings that no longer parse (nothing to run)."""
    try:
        return cluster_router(cluster).driver
    except RouterSettingsError:
        return "none"


def samples_log_path(cluster: TritonCluster) -> Path | None:
    """The nginx router's log of a shadow's sampled request bodies (releases/agreement.py);
    None without one."""
    log = access_log_path(cluster)
    return log.with_name("samples.log") if log is not None else None


def access_log_path(cluster: TritonCluster) -> Path | None:
    """The nginx router's access log; None without one (or with unusable settings: the
    tick's effects report those when they apply the router)."""
    if router_driver_name(cluster) != "nginx":
        return None
    try:
        return router_prefix(cluster) / "logs" / "access.log"
    except RouterSettingsError:
        return None


def route_for(release, weight: float, mirror: float = 0.0) -> ModelRoute:
    """The release's model split: `weight`% to the candidate, the rest to the baseline; a
    candidate served under its sibling name (a config canary) is sent there. `mirror`: the
    percent of requests also copied to the candidate (a shadow), with the release's
    agreement sample of them logged for its comparer."""
    baseline, candidate = release.baseline.version, release.candidate.version
    weights = {baseline: 100.0 - weight, candidate: weight}
    return ModelRoute(
        model=release.model.name,
        weights=weights,
        sticky_header=release.sticky_header or None,
        targets={candidate: release.candidate_name} if release.candidate_name else {},
        mirror=mirror,
        mirror_version=candidate if mirror else None,
        sample=float((release.agreement or {}).get("sample_share") or 0.0) if mirror else 0.0,
    )


def routes_for(release, weight: float, mirror: float = 0.0) -> list[ModelRoute]:
    """The release's routes: its model's (`route_for`) and, in a graph release, each
    caller's: the same split of the caller's traffic, its arms the model's versions, the
    candidate's arm sent to the caller's sibling (which calls the candidate's sibling)."""
    own = route_for(release, weight, mirror)
    callers = [
        ModelRoute(
            model=caller["model"],
            weights=dict(own.weights),
            sticky_header=own.sticky_header,
            targets={release.candidate.version: caller["served_as"]},
            served_version=int(caller["version"]),
        )
        for caller in release.callers or []
    ]
    return [own, *callers]


def router_state(
    cluster: TritonCluster, routes: list[ModelRoute], live: RouterState | None = None
) -> RouterState:
    """The whole state to apply: `routes`, sent to the nodes the membership rule admits
    (`router_upstreams`, given what the running router `live` sends to now)."""
    serving = live.upstreams if live is not None else []
    upstreams = router_upstreams(cluster, serving)
    return RouterState(
        upstreams=upstreams, routes=routes, grpc_upstreams=grpc_upstreams(cluster, upstreams)
    )


def grpc_upstreams(cluster: TritonCluster, upstreams: list[str]) -> list[str]:
    """The gRPC endpoints of the nodes the router sends HTTP to (same membership), for the
    gRPC pass-through; a node without a usable grpc_url is left out of it."""
    out = []
    for node in cluster.nodes.all():
        if node.http_url not in upstreams or not node.grpc_url:
            continue
        try:
            out.append(grpc_address(node.grpc_url))
        except RouterError:
            continue
    return out


# --- membership: which nodes the router sends to (one rule, used by every apply) ----------


def router_refusal(node: TritonNode) -> str | None:
    """Why the router cannot send to this node's address at all (None: it can). Such a node
    is left out of the router and shown as such; it never stops the router for the others."""
    try:
        address = upstream_address(node.http_url)
    except RouterError as exc:
        return str(exc)
    host, _, port = address.rpartition(":")
    try:
        socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return f"nginx cannot resolve the host {host!r}"
    return None


def routable(
    *,
    routed: bool,
    loaded: dict[str, set[str]] | None,
    desired: dict[str, list[int]],
    seen_ago_s: float | None,
    grace_s: float,
    served: frozenset[str] = frozenset(),
) -> bool:
    """The membership rule (pure). `loaded`: the node's loaded versions by model, None when
    it does not answer; `seen_ago_s`: since reconcile last saw it up (None: never);
    `served`: the desired models some routed node serves now.

    * A node joins once it answers with every version the cluster must serve loaded, so a
      node added, or restarted empty, gets no traffic until reconcile has loaded it.
    * A node the router sends to stays while it answers with at least one of those versions
      loaded for every model that other routed nodes serve (a release or a push may be
      loading the next version; a model no routed node serves yet is nobody's fault), and
      while it does not answer for at most `grace_s` since it was last seen up.
    """
    if loaded is None:
        return routed and seen_ago_s is not None and seen_ago_s <= grace_s
    have = {m: {str(v) for v in vs} & loaded.get(m, set()) for m, vs in desired.items()}
    if routed:
        return all(have[m] or m not in served for m in desired)
    return all(have[m] == {str(v) for v in vs} for m, vs in desired.items())


def router_upstreams(cluster: TritonCluster, serving: list[str]) -> list[str]:
    """The node URLs the router must send to now, in node order (`routable` for each node
    whose address it can use; each node asked at once what it has loaded)."""
    nodes = [n for n in cluster.nodes.all() if router_refusal(n) is None]
    desired = {**desired_state(cluster=cluster), **siblings_serving(cluster)}
    loaded = fan_out(nodes, _loaded_or_none)
    served = frozenset(
        model
        for n in nodes
        if n.http_url in serving and loaded[n.pk] is not None
        for model, versions in desired.items()
        if {str(v) for v in versions} & loaded[n.pk].get(model, set())
    )
    now = timezone.now()
    return [
        n.http_url
        for n in nodes
        if routable(
            routed=n.http_url in serving,
            loaded=loaded[n.pk],
            desired=desired,
            seen_ago_s=(now - n.last_seen_at).total_seconds() if n.last_seen_at else None,
            grace_s=settings.SWITCHYARD_ROUTER_DOWN_GRACE_S,
            served=served,
        )
    ]


def siblings_serving(cluster: TritonCluster) -> dict[str, list[int]]:
    """{sibling name: [its version]} of the config canaries whose candidate (and graph
    releases whose callers' siblings) must be loaded on every node now (their
    baseline+candidate set applied): a node without it
    would answer the candidate's share with "unknown model", so the membership rule keeps
    such a node out of the router as it does one missing a desired version."""
    active = (
        Release.objects.filter(cluster=cluster, applied_serving="baseline+candidate")
        .exclude(candidate_name="")
        .exclude(phase__in=[p.value for p in TERMINAL])
        .select_related("candidate")
    )
    out = {}
    for release in active:
        out[release.candidate_name] = [release.candidate.version]
        out.update({c["served_as"]: [int(c["version"])] for c in release.callers or []})
        out.update({s["served_as"]: [int(s["version"])] for s in release.step_loads or []})
    return out


def _loaded_or_none(node: TritonNode) -> dict[str, set[str]] | None:
    try:
        with client_for(node) as client:
            return client.loaded_models()
    except TritonError:
        return None


def router_logs_rotated(cluster: TritonCluster) -> list[str]:
    """The cluster's router logs above SWITCHYARD_ROUTER_LOG_MAX_BYTES rotated (the access
    log, a shadow's samples of client bodies, the error log); the names rotated."""
    if cluster_router(cluster).driver != "nginx":  # unusable settings: RouterSettingsError
        return []
    with router_changing(cluster):  # never between a reload and its check
        return router_for(cluster).rotate_logs(settings.SWITCHYARD_ROUTER_LOG_MAX_BYTES)


def router_sync(cluster: TritonCluster) -> bool:
    """Point a running router at the nodes the membership rule admits now (`routable`); True
    when it changed. The routes nginx serves stay as they are. A router that is not running
    is left alone: whoever starts it (run_router, a release) applies the whole state."""
    if cluster_router(cluster).driver != "nginx":  # unusable settings: RouterSettingsError
        return False
    router = router_for(cluster)
    with router_changing(cluster):
        live = router.current()
        if live is None:
            return False
        nodes = router_upstreams(cluster, live.upstreams)
        grpc = grpc_upstreams(cluster, nodes)
        if live.upstreams == nodes and live.grpc_upstreams == grpc:
            return False
        router.apply(RouterState(upstreams=nodes, routes=live.routes, grpc_upstreams=grpc))
    return True
