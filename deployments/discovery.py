"""Node discovery from the control plane's side: no credential on any node.

A cluster named in SWITCHYARD_NODE_DISCOVERY has nodes that come and go with a DNS name,
e.g. a Kubernetes headless Service (one address per pod):

    {"<cluster>": {"dns": "triton-nodes", "http_port": 8000, "grpc_port": 8001,
                   "metrics_port": 8002}}

Each pass (beat, `deployments.discover_nodes`) resolves the name and, through the node
services, adds a node for every new address and takes out every node it added whose address
the name no longer lists; both audited as the system. Nodes it adds are named after their
address (`dns-10-1-2-3`); nodes registered any other way are never touched. A name that does
not exist lists no address (a Service without pods); any other DNS failure changes nothing.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings

from deployments.models import TritonCluster, TritonNode
from deployments.services import DeploymentError, node_create, node_remove

log = logging.getLogger(__name__)

NAME_PREFIX = "dns-"
# getaddrinfo's answers for a name that does not exist (or has no IPv4 address).
_NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


@dataclass(frozen=True)
class Discovery:
    """Where one cluster's nodes are found and the ports every one of them serves."""

    dns: str
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002

    @classmethod
    def parse(cls, value: object) -> Discovery:
        """ValueError unless `value` is {"dns": name, and optionally each port}."""
        if not isinstance(value, dict) or not isinstance(value.get("dns"), str):
            raise ValueError('a discovery setting is {"dns": "<name>", "http_port": ...}')
        unknown = set(value) - {"dns", "http_port", "grpc_port", "metrics_port"}
        if unknown or not value["dns"].strip():
            raise ValueError(f"unknown or empty discovery fields: {sorted(unknown) or 'dns'}")
        ports = {k: v for k, v in value.items() if k != "dns"}
        if any(type(p) is not int or not 0 < p < 65536 for p in ports.values()):
            raise ValueError("discovery ports are integers from 1 to 65535")
        return cls(dns=value["dns"].strip(), **ports)


@dataclass
class DiscoveryPass:
    """What one pass did on one cluster (node names)."""

    addresses: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def discovery_settings() -> dict[str, Discovery]:
    """Cluster name -> its discovery, from SWITCHYARD_NODE_DISCOVERY; bad entries logged."""
    found = {}
    for cluster, value in (settings.SWITCHYARD_NODE_DISCOVERY or {}).items():
        try:
            found[str(cluster)] = Discovery.parse(value)
        except ValueError as exc:
            log.error("SWITCHYARD_NODE_DISCOVERY[%r] is ignored: %s", cluster, exc)
    return found


def addresses_of(name: str) -> list[str] | None:
    """The IPv4 addresses `name` lists, sorted; [] when it does not exist; None when DNS
    could not say (a timeout, no server), so that a DNS outage never drains a cluster."""
    try:
        infos = socket.getaddrinfo(name, None, family=socket.AF_INET, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno in _NO_SUCH_NAME:
            return []
        log.warning("node discovery: %s did not resolve (%s): nothing changes", name, exc)
        return None
    return sorted({info[4][0] for info in infos})


def node_name(address: str) -> str:
    return NAME_PREFIX + address.replace(".", "-")


def _discovered_address(node: TritonNode) -> str | None:
    """The address of a node this module added, else None (named after its own address)."""
    host = urlsplit(node.http_url).hostname or ""
    return host if node.name == node_name(host) else None


def cluster_nodes_discover(
    *, cluster: TritonCluster, discovery: Discovery, addresses: list[str]
) -> DiscoveryPass:
    """Make the cluster's discovered nodes those at `addresses`: new ones added, gone ones
    taken out (node services, audited as the system); a refused change is retried next pass."""
    done = DiscoveryPass(addresses=list(addresses))
    nodes = list(cluster.nodes.all())
    ours = {n.name: n for n in nodes if _discovered_address(n) is not None}
    known_urls = {n.http_url for n in nodes}
    for address in addresses:
        if node_name(address) not in ours and _http_url(address, discovery) not in known_urls:
            _add(cluster, discovery, address, done)
    wanted = {node_name(a) for a in addresses}
    for name, node in ours.items():
        if name not in wanted:
            _drain(node, done)
    return done


def _http_url(address: str, discovery: Discovery) -> str:
    return f"http://{address}:{discovery.http_port}"


def _add(cluster: TritonCluster, discovery: Discovery, address: str, done: DiscoveryPass):
    name = node_name(address)
    try:
        node_create(
            cluster=cluster,
            actor=None,
            name=name,
            http_url=_http_url(address, discovery),
            grpc_url=f"{address}:{discovery.grpc_port}",
            metrics_url=f"http://{address}:{discovery.metrics_port}/metrics",
        )
    except DeploymentError as exc:  # outside the allowed networks, say: logged each pass
        done.failed[name] = exc.message
        return
    done.added.append(name)


def _drain(node: TritonNode, done: DiscoveryPass) -> None:
    try:
        node_remove(node=node, actor=None)
    except DeploymentError as exc:  # a deployment runs on the cluster: the next pass
        done.failed[node.name] = exc.message
        return
    done.drained.append(node.name)


def nodes_discover_all() -> dict[str, DiscoveryPass]:
    """One discovery pass over every cluster SWITCHYARD_NODE_DISCOVERY names."""
    passes = {}
    for name, discovery in discovery_settings().items():
        cluster = TritonCluster.objects.filter(name=name).first()
        if cluster is None:
            log.warning("node discovery: no cluster named %r (register it first)", name)
            continue
        addresses = addresses_of(discovery.dns)
        if addresses is None:
            continue
        passes[name] = done = cluster_nodes_discover(
            cluster=cluster, discovery=discovery, addresses=addresses
        )
        for node, why in done.failed.items():
            log.warning("node discovery: %s/%s not changed: %s", name, node, why)
    return passes
