"""Helpers of the live telemetry tests: example models on real nodes, clusters in the
database, traffic, and a collector running in a thread of its own."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from contextlib import contextmanager

from demo.traffic import Traffic, TrafficTarget, request_body
from deployments.models import TritonCluster, TritonNode
from telemetry.runner import CollectorRunner
from tests.exampledata import example_config_json, example_files
from tests.nodes import keyed_client


def streaming(node, name: str, stop: threading.Event) -> None:
    """Streams of 11 tokens to the example decoupled model (it counts them), one at a time,
    until `stop` is set."""
    body = json.dumps({"PROMPT": "a ticket", "MAX_TOKENS": 11}).encode()
    url = f"{node.http_url}/v2/models/{name}/generate_stream"
    while not stop.is_set():
        request = urllib.request.Request(url, data=body, method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
            answer.read()


def db_cluster(name: str, nodes, **fields) -> TritonCluster:
    cluster = TritonCluster.objects.create(name=name, environment="staging", **fields)
    for node in nodes:
        TritonNode.objects.create(
            cluster=cluster,
            name=node.name,
            http_url=node.http_url,
            grpc_url=node.grpc_url,
            metrics_url=node.metrics_url,
        )
    return cluster


def load_example(nodes, *, example: str, name: str, versions: list[int]) -> dict:
    """Load versions of an example model on every node; its config as Triton reports it."""
    files = {}
    for version in versions:
        for key, content in example_files(example, version).items():
            files[key.removeprefix("file:")] = content
    config = example_config_json(example, name=name, versions=versions)
    for node in nodes:
        with keyed_client(node, load_timeout_s=60) as client:
            client.load(name, config_json=config, files=files)
            reported = client.model_config(name)
    return reported


def unload(nodes, name: str) -> None:
    for node in nodes:
        with keyed_client(node) as client:
            if client.is_live():
                client.unload(name)


class CheckedTraffic(Traffic):
    """demo.traffic's clients (no retries: a reset connection is counted under its exception's
    name). Leaving the `with` block without an error asserts what was answered: every request
    a 200 unless `allowed` names the other outcomes the test expects (a node it restarts)."""

    def __init__(self, *args, allowed: frozenset[str] = frozenset(), **kwargs):
        super().__init__(*args, **kwargs)
        self.allowed = allowed

    def __exit__(self, exc_type, *exc) -> None:
        super().__exit__(exc_type, *exc)
        if exc_type is None:
            outcomes = dict(self.stats.by_status)
            assert outcomes.get("200", 0) > 0, f"no request answered: {outcomes}"
            unexpected = {k: n for k, n in outcomes.items() if k != "200" and k not in self.allowed}
            assert not unexpected, f"requests not answered 200 (resets included): {outcomes}"


def traffic(
    nodes,
    model: str,
    config: dict,
    *,
    version: str,
    rps: float,
    allowed: frozenset[str] = frozenset(),
) -> CheckedTraffic:
    body = request_body(json.loads(json.dumps(config)))
    targets = [TrafficTarget(node.http_url, model, version, body) for node in nodes]
    return CheckedTraffic(targets, rps=rps, workers=3, allowed=allowed)


@contextmanager
def running_collector(interval_s: float = 1.0):
    """CollectorRunner ticking in a background thread with its own event loop."""
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    runner = CollectorRunner(interval_s=interval_s)
    errors: list[BaseException] = []

    def main() -> None:
        try:
            loop.run_until_complete(runner.run(stop))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            errors.append(exc)
        finally:
            loop.close()

    thread = threading.Thread(target=main, name="collector", daemon=True)
    thread.start()
    try:
        yield runner
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=15)
        if errors:
            raise errors[0]
