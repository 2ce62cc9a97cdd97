"""What a tick observes: candidate readiness, per-version traffic from every node's metrics
and from the router's access log, and in-flight work. Reads only; no database writes.

Counters are summed over nodes. The analysis interval's starting counters are kept on the
release (`interval`); a counter that went down (node or model restart) counts from zero.
"""

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from deployments import push
from integrations.routers.access_log import AccessLogEntry, AccessLogTail, summarize_entries
from integrations.triton.errors import TritonError
from integrations.triton.metrics import parse_metrics
from releases.analysis import Metrics
from releases.routing import access_log_path

COUNTERS = ("success", "failure", "request_us", "queue_us")


@dataclass
class NodeView:
    live: bool
    candidate_ready: bool = False
    candidate_loaded: bool = False
    counters: dict[str, dict[str, float]] = field(default_factory=dict)  # version -> counters
    pending: dict[str, float] = field(default_factory=dict)
    p99_ms: dict[str, float] = field(default_factory=dict)


def _scrape(node, model: str) -> tuple[dict, dict, dict]:
    import urllib.request

    with urllib.request.urlopen(node.metrics_url, timeout=2) as response:  # noqa: S310
        snapshot = parse_metrics(response.read().decode())
    counters, pending, p99 = {}, {}, {}
    for (name, version), series in snapshot.models.items():
        if name != model:
            continue
        values = {k: series.counters.get(k, 0.0) for k in ("success", "request_us", "queue_us")}
        values["failure"] = sum(series.failures.values())
        counters[version], pending[version] = values, series.pending
        quantile = series.quantile("request", "0.99")
        if quantile is not None:
            p99[version] = quantile / 1000.0
    return counters, pending, p99


def node_view(node, model: str, candidate: int) -> NodeView:
    """One node: readiness of the candidate and the model's counters; never raises."""
    try:
        with push.client_for(node) as client:
            ready = client.model_ready(model, candidate)
            loaded = str(candidate) in client.loaded_models().get(model, set())
        counters, pending, p99 = _scrape(node, model) if node.metrics_url else ({}, {}, {})
        return NodeView(True, ready, loaded, counters, pending, p99)
    except (TritonError, OSError, ValueError):
        return NodeView(False)


def nodes_view(cluster, model: str, candidate: int) -> dict[str, NodeView]:
    nodes = list(cluster.nodes.all())
    views = push.fan_out(nodes, lambda n: node_view(n, model, candidate))
    return {n.name: views[n.pk] for n in nodes}


def counters_now(views: dict[str, NodeView], log: Path | None = None) -> dict:
    """{"at", "nodes": {node: {version: counters}}, "log_offset"} to start an interval from."""
    offset = log.stat().st_size if log is not None and log.exists() else 0
    return {
        "at": time.time(),
        "log_offset": offset,
        "nodes": {name: v.counters for name, v in views.items() if v.live},
    }


# (log, offset where an interval started) -> (its tail, the entries read so far). A tick
# reads only what nginx appended since the previous tick in this process; another process
# (a different Celery worker) starts from the interval's offset and gets the same entries.
_TAILS: OrderedDict[tuple[str, int], tuple[AccessLogTail, list[AccessLogEntry]]] = OrderedDict()
_TAILS_KEPT = 16


def _router_entries(log: Path | None, start: dict) -> list[AccessLogEntry]:
    """The access log's entries written since the interval started (each line parsed once)."""
    if log is None or not log.exists() or not start.get("at"):
        return []
    key = (str(log), int(start.get("log_offset", 0)))
    tail, entries = _TAILS.pop(key, None) or (AccessLogTail(log, key[1]), [])
    if log.stat().st_size < tail.offset:  # the log was rotated: read it all
        tail, entries = AccessLogTail(log, 0), []
    entries = entries + tail.read_entries()
    _TAILS[key] = (tail, entries)
    while len(_TAILS) > _TAILS_KEPT:
        _TAILS.popitem(last=False)
    return entries


def _delta(before: dict, after: dict, version: str) -> dict[str, float]:
    total = dict.fromkeys(COUNTERS, 0.0)
    for node, versions in after.get("nodes", {}).items():
        now = versions.get(version)
        if now is None:
            continue
        then = before.get("nodes", {}).get(node, {}).get(version, {})
        restarted = any(now[k] < then.get(k, 0.0) for k in COUNTERS)
        for key in COUNTERS:
            total[key] += now[key] - (0.0 if restarted else then.get(key, 0.0))
    return total


def interval_metrics(release, views: dict[str, NodeView], start: dict) -> dict[str, Metrics]:
    """Baseline and candidate traffic since `start`, from Triton and from the router."""
    now = counters_now(views)
    since = start.get("at", 0)
    entries = [
        e
        for e in _router_entries(access_log_path(release.cluster), start)
        if e.ts >= since and e.model == release.model.name and e.version is not None
    ]
    router = summarize_entries(entries)
    out: dict = {"latencies": {}}
    for role, version in (
        ("baseline", release.baseline.version),
        ("candidate", release.candidate.version),
    ):
        d = _delta(start, now, str(version))
        requests = int(d["success"] + d["failure"])
        p99s = [v.p99_ms[str(version)] for v in views.values() if str(version) in v.p99_ms]
        seen = router.get((release.model.name, version))
        out["latencies"][role] = [
            e.request_time_s * 1000 for e in entries if e.version == version and not e.is_error
        ]
        out[role] = Metrics(
            requests=requests,
            errors=int(d["failure"]),
            avg_ms=d["request_us"] / d["success"] / 1000.0 if d["success"] else None,
            # The router's per-request latencies cover exactly this interval; Triton's
            # summary quantiles span a longer window (warm-up outliers linger there).
            p99_ms=(seen["latency_ms_p99"] if seen else max(p99s) if p99s and requests else None),
            queue_ms=d["queue_us"] / d["success"] / 1000.0 if d["success"] else None,
            router_requests=int(seen["requests"]) if seen else None,
            router_errors=int(seen["errors"]) if seen else None,
        )
    return out


def pending_requests(views: dict[str, NodeView], version: int) -> float:
    return sum(v.pending.get(str(version), 0.0) for v in views.values())
