"""Talking to the suite's local Triton nodes directly, with the key they were started with."""

from integrations.triton.client import TritonClient
from integrations.triton.local import LocalNode


def keyed_client(node: LocalNode, **options) -> TritonClient:
    """A client of a local node that sends its node key on restricted calls (none if open)."""
    return TritonClient(node.http_url, node.grpc_url, node_key=node.node_key, **options)


def grpc_key(node: LocalNode) -> dict[str, str] | None:
    """The gRPC metadata for a raw tritonclient call to a restricted API of `node`."""
    return node.node_key.grpc_headers() if node.node_key else None


def http_key(node: LocalNode) -> dict[str, str] | None:
    """The HTTP headers for a raw tritonclient call to a restricted API of `node`."""
    return node.node_key.http_headers() if node.node_key else None


def register_nodes(cluster, nodes, *, actor) -> None:
    """Register local nodes in a cluster row as the API does (node_create)."""
    from deployments.services import node_create

    for node in nodes:
        node_create(
            cluster=cluster,
            actor=actor,
            name=node.name,
            http_url=node.http_url,
            grpc_url=node.grpc_url,
            metrics_url=node.metrics_url,
        )
