"""The control plane's own inferences, counted where they are sent, so that the collector
and the health watch can take them off Triton's counters (docs/COSTS.md, "Client traffic").

One Redis hash per node holds cumulative counters per (model, version, origin, outcome),
incremented once the answer (or the error) is back. Readers keep the last reading and use
deltas, like Triton's own counters: a hash that expired (no own request on the node for
`KEEP_S`) starts again from zero, which a reader sees as a counter that went down.
Counting never fails the inference: with Redis away the request simply counts as a
client's.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator

import redis

from core import redis_pool

log = logging.getLogger(__name__)

PROBE, WARMUP, SMOKE, BENCHMARK, COMPARE = "probe", "warmup", "smoke", "benchmark", "compare"
ORIGINS = (PROBE, WARMUP, SMOKE, BENCHMARK, COMPARE)
OUTCOMES = ("success", "failure")


def key_prefix() -> str:
    """Every node's counters' key starts with this (the install's prefix, core/redis_pool.py)."""
    return redis_pool.key("own_traffic", "")


SEPARATOR = "\x1f"  # names never contain it (as in telemetry/status.py)
KEEP_S = 2 * 86400

# (model, version, origin) -> {"success": n, "failure": n}: one node's cumulative counts.
Counts = dict[tuple[str, str, str], dict[str, float]]


def _client() -> redis.Redis:
    return redis_pool.client()


def _key(cluster: str, node: str) -> str:
    return f"{key_prefix()}{cluster}{SEPARATOR}{node}"


def own_request_count(
    *, cluster: str, node: str, model: str, version, origin: str, is_ok: bool, n: int = 1
) -> None:
    """Add `n` answered own requests of `origin` to the node's counters; never raises."""
    field = SEPARATOR.join((model, str(version), origin, "success" if is_ok else "failure"))
    try:
        client = _client()
        try:
            pipe = client.pipeline(transaction=False)
            pipe.hincrby(_key(cluster, node), field, n)
            pipe.expire(_key(cluster, node), KEEP_S)
            pipe.execute()
        finally:
            client.close()
    except redis.RedisError as exc:
        log.warning("own request of %s on %s/%s not counted: %s", model, cluster, node, exc)


@contextlib.contextmanager
def counted(node, model: str, version, origin: str) -> Iterator[None]:
    """Count the inference sent in the block once it is answered: a success when the block
    returns, a failure when it raises (Triton counts what it answered with an error)."""
    where = {"cluster": node.cluster.name, "node": node.name, "model": model}
    try:
        yield
    except BaseException:
        own_request_count(**where, version=version, origin=origin, is_ok=False)
        raise
    own_request_count(**where, version=version, origin=origin, is_ok=True)


def parse(raw: dict) -> Counts:
    """One node's hash as Redis answers it -> Counts (unreadable fields are skipped)."""
    out: Counts = defaultdict(lambda: {"success": 0.0, "failure": 0.0})
    for field, value in raw.items():
        text = field.decode() if isinstance(field, bytes) else str(field)
        parts = text.split(SEPARATOR)
        if len(parts) != 4 or parts[3] not in OUTCOMES:
            continue
        try:
            out[(parts[0], parts[1], parts[2])][parts[3]] += float(value)
        except ValueError:
            continue
    return dict(out)


def own_counts_read(nodes: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Counts]:
    """(cluster, node) -> its cumulative Counts (empty when none); raises RedisError."""
    nodes = list(nodes)
    client = _client()
    try:
        pipe = client.pipeline(transaction=False)
        for cluster, node in nodes:
            pipe.hgetall(_key(cluster, node))
        answers = pipe.execute()
    finally:
        client.close()
    return {key: parse(raw) for key, raw in zip(nodes, answers, strict=True)}


def own_counts_forget(*, cluster: str, node: str, keys: list[tuple[str, str, str]]) -> None:
    """Drop the node's counters of these (model, version, origin); raises RedisError."""
    fields = [SEPARATOR.join((*key, outcome)) for key in keys for outcome in OUTCOMES]
    if not fields:
        return
    client = _client()
    try:
        client.hdel(_key(cluster, node), *fields)
    finally:
        client.close()
