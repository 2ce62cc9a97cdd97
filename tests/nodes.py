"""Talking to the suite's local Triton nodes directly, with the key they were started with."""

import contextlib

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


@contextlib.contextmanager
def example_on_every_node(fleet, example: str, *, name: str, versions: list[int]):
    """The example model's `versions` loaded under `name` on every node of the fleet (over
    gRPC with the fleet's key, each version READY); yields the name, unloads it after."""
    import tritonclient.grpc as grpcclient

    from tests.exampledata import example_config_json, example_files

    config = example_config_json(example, name=name, versions=versions)
    files = {k: v for version in versions for k, v in example_files(example, version).items()}
    clients = [grpcclient.InferenceServerClient(node.grpc_url) for node in fleet.nodes]
    key = grpc_key(fleet.nodes[0])
    try:
        for client in clients:
            client.load_model(name, config=config, files=files, headers=key, client_timeout=60)
            assert all(client.is_model_ready(name, str(v)) for v in versions), name
        yield name
    finally:
        for client in clients:
            try:
                client.unload_model(name, headers=key, client_timeout=60)
            finally:
                client.close()
