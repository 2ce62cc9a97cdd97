"""Model-level probes: one real inference of every serving version on every node, with the
smallest valid request the version's config allows (the generator the smoke test and the
push's warm-up use). Triton's READY is not enough: a version can be READY and answer
every request with an error. Reads only; never raises; no database writes.
"""

import time
from dataclasses import dataclass, field

import redis
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2

from deployments import own_traffic, push
from integrations.triton.errors import TritonError
from integrations.triton.memory import metrics_text

_INPUTS: dict[tuple[int, str], dict] = {}  # (version pk, digest) -> generated request


@dataclass(frozen=True)
class Target:
    model: str
    version: int
    version_pk: int
    digest: str
    config_json: dict


@dataclass
class ProbeResult:
    ready: bool
    ok: bool = False
    error: str = ""
    latency_ms: float | None = None


@dataclass
class NodeProbes:
    live: bool
    error: str = ""
    results: dict[tuple[str, int], ProbeResult] = field(default_factory=dict)
    metrics: str | None = None
    requests: int = 0  # requests this pass sent to the node
    own: dict | None = None  # the node's own-traffic counters, read with its metrics


def probe_inputs(target: Target) -> dict:
    """The probe request of a version (cached: a version's config never changes)."""
    key = (target.version_pk, target.digest)
    if key not in _INPUTS:
        config = model_config_pb2.ModelConfig()
        json_format.ParseDict(target.config_json, config, ignore_unknown_fields=True)
        config_dict = json_format.MessageToDict(config, preserving_proto_field_name=True)
        _INPUTS[key] = push.warmup_inputs(config_dict)
    return _INPUTS[key]


def _probe_one(client, node, target: Target) -> tuple[ProbeResult, int]:
    if not client.model_ready(target.model, target.version):
        return ProbeResult(ready=False), 1
    try:
        sample = probe_inputs(target)
    except ValueError as exc:  # no valid request can be built: nothing to probe with
        return ProbeResult(ready=True, ok=True, error=f"not probed: {exc}"), 1
    started = time.perf_counter()
    try:
        with own_traffic.counted(node, target.model, target.version, own_traffic.PROBE):
            client.infer(target.model, sample, version=target.version)
    except TritonError as exc:
        return ProbeResult(ready=True, ok=False, error=str(exc)), 2
    return ProbeResult(True, True, latency_ms=(time.perf_counter() - started) * 1000.0), 2


def node_probes(node, targets: list[Target], timeout_s: float) -> NodeProbes:
    """Probe every target on one node and read its metrics once."""
    out = NodeProbes(live=True)
    try:
        with push.client_for(node) as client:
            for target in targets:
                result, sent = _probe_one(client, node, target)
                out.results[(target.model, target.version)] = result
                out.requests += sent
    except TritonError as exc:
        return NodeProbes(live=False, error=str(exc), requests=out.requests)
    if node.metrics_url:
        # Own counters first: every own request in them is in the metrics read after.
        out.own = _own_counts(node)
        out.metrics = metrics_text(node.metrics_url, timeout_s)
        out.requests += 1
    return out


def _own_counts(node) -> dict | None:
    """The node's own-traffic counters (this pass's probes are in them), None without Redis."""
    key = (node.cluster.name, node.name)
    try:
        return own_traffic.own_counts_read([key])[key]
    except redis.RedisError:
        return None
