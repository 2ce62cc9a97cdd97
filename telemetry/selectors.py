"""Reads for telemetry: what the collector watches, and rollup time series."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import redis
from django.conf import settings

from deployments.models import TritonCluster, TritonNode
from deployments.validation import cluster_metrics, node_urls_check
from integrations.metrics_source import MetricsSettings, MetricsSettingsError
from integrations.triton.memory import NodeMemory
from telemetry import events, recent, resolution, series, status
from telemetry.collector import Target

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrometheusCluster:
    """A cluster whose numbers come from Prometheus; instance label -> node name."""

    cluster: str
    url: str
    instances: tuple[tuple[str, str], ...]


def _metrics(cluster: TritonCluster) -> MetricsSettings | None:
    """The cluster's metrics source; None (logged, cluster skipped) when it is unusable."""
    try:
        return cluster_metrics(cluster)
    except MetricsSettingsError as exc:
        log.warning("metrics of cluster %s not collected: %s: %s", cluster, exc.field, exc)
        return None


def _source(cluster: TritonCluster) -> str:
    metrics = _metrics(cluster)
    return metrics.source if metrics else "none"


def _nodes_with_metrics():
    return TritonNode.objects.select_related("cluster").exclude(metrics_url="")


def scrape_targets() -> list[Target]:
    """Every node with a metrics URL in a cluster whose source is scrape."""
    return [
        Target(node.cluster.name, node.name, node.metrics_url)
        for node in _nodes_with_metrics()
        if _source(node.cluster) == "scrape" and _may_scrape(node)
    ]


def _may_scrape(node: TritonNode) -> bool:
    """False (logged) for a stored address that is unusable or outside the allowed networks."""
    errors = node_urls_check(http=node.http_url, grpc=node.grpc_url, metrics=node.metrics_url)
    if errors:
        log.warning("node %s not scraped: %s", node, "; ".join(errors.values()))
    return not errors


def prometheus_clusters() -> list[PrometheusCluster]:
    """Clusters whose metrics come from Prometheus, with each node's `instance` label."""
    out = []
    for cluster in TritonCluster.objects.prefetch_related("nodes"):
        metrics = _metrics(cluster)
        if metrics is None or metrics.source != "prometheus" or not metrics.url:
            continue
        url = metrics.url
        instances = tuple(
            (urlsplit(n.metrics_url).netloc, n.name) for n in cluster.nodes.all() if n.metrics_url
        )
        out.append(PrometheusCluster(cluster.name, url, instances))
    return out


def metric_series(**where) -> list[dict]:
    """Per-minute points per (cluster, model, version), summed over nodes unless `node`
    (`since` and optional `until`, `cluster`, `model`, `version`, `node`)."""
    return series.model_series(**where, step=resolution.MINUTE)[1]


def node_series(*, since: datetime, cluster: str, node: str = "") -> list[dict]:
    """Per-minute CPU and GPU utilization averages of each node of a cluster."""
    return series.node_series(since=since, cluster=cluster, node=node, step=resolution.MINUTE)[1]


# A live page opens with this much of the recent past drawn (rollups, then the buffer).
LIVE_HISTORY_S = 15 * 60


def _epoch_point(point: dict) -> dict:
    """A rollup point in the live points' shape: epoch seconds, drawn mid-minute."""
    minute = datetime.fromisoformat(point["ts"]).timestamp()
    return {**point, "type": "point", "node": "", "ts": minute + 30, "minute": minute}


def _rollup_node_points(cluster: str, since: datetime) -> list[dict]:
    out = []
    for row in node_series(since=since, cluster=cluster):
        minute = datetime.fromisoformat(row["ts"]).timestamp()
        gpus = [] if row["gpu_util"] is None else [{"gpu_uuid": "avg", "util": row["gpu_util"]}]
        out.append(
            {
                "type": "node",
                "ts": minute + 30,
                "minute": minute,
                "cluster": cluster,
                "node": row["node"],
                "cpu_util": row["cpu_util"],
                "mem_used": None,
                "gpus": gpus,
                "stale": False,
                "error": "",
            }
        )
    return out


def live_history(*, cluster: str = "", model: str = "", now: float) -> dict:
    """What a live page draws on opening: the last LIVE_HISTORY_S seconds as per-minute
    rollups up to where the collector's recent buffer starts, then the buffer's points.
    {"points": model points, "nodes": node points (cluster pages), "buffer_from": epoch}."""
    group = events.cluster_group(cluster) if cluster else events.model_group(model)
    buffered = recent.recent_points(group=group, since=now - LIVE_HISTORY_S)
    start = buffered[0]["ts"] if buffered else now
    # From the minute the window starts in, so the window is drawn whole.
    since = datetime.fromtimestamp(now - LIVE_HISTORY_S, tz=UTC).replace(second=0, microsecond=0)
    rolled = [_epoch_point(p) for p in metric_series(since=since, cluster=cluster, model=model)]
    nodes = _rollup_node_points(cluster, since) if cluster else []
    return {
        "points": [p for p in rolled if p["minute"] + 60 <= start]
        + [p for p in buffered if p["type"] == "point"],
        "nodes": [p for p in nodes if p["minute"] + 60 <= start]
        + [p for p in buffered if p["type"] == "node"],
        "buffer_from": start,
    }


def _collector_silent(now: float) -> str:
    """Why nothing was scraped lately ('' when the collector ticks)."""
    try:
        last = status.collector_status_read().last_tick_at
    except redis.RedisError:
        last = None
    if last is None:
        return (
            "Waiting for the first scrape: the collector has not run yet "
            "(python manage.py run_collector)."
        )
    if now - last > max(10.0, 5 * settings.TELEMETRY_INTERVAL_S):
        return f"Waiting for the next scrape: the collector last scraped {int(now - last)} s ago."
    return ""


def live_empty_reasons(*, history: dict, now: float, what: str) -> dict:
    """Why a live page's charts are empty, in words: {"traffic": ..., "nodes": ...} ('' for
    a chart that has something to draw). `what` names the page's subject in the sentence."""
    silent = _collector_silent(now)
    latest = {p["node"]: p for p in history["nodes"]}
    down = [p for p in latest.values() if p["stale"]]
    span = f"the last {LIVE_HISTORY_S // 60} minutes"
    no_traffic = f"No traffic in {span}: no request reached {what}."
    reasons = {"traffic": "", "nodes": "", "no_traffic": no_traffic}
    if not history["nodes"]:
        reasons["nodes"] = silent or "No node of this cluster has a metrics URL to scrape."
    if not history["points"]:
        if silent:
            reasons["traffic"] = silent
        elif latest and len(down) == len(latest):
            errors = "; ".join(f"{p['node']}: {p['error'] or 'no answer'}" for p in down)
            reasons["traffic"] = f"Node down: no node answers its metrics scrape ({errors})."
        else:
            reasons["traffic"] = no_traffic
    return reasons


def node_memory_recent(*, cluster: str, since: float) -> dict[str, NodeMemory]:
    """Each node's last reported host memory since `since` (epoch s), from the collector's
    recent buffer (no node is called): {node name: NodeMemory}; a node with no reading of
    both gauges in the window is absent."""
    latest: dict[str, NodeMemory] = {}
    for point in recent.recent_points(group=events.cluster_group(cluster), since=since):
        used, total = point.get("mem_used"), point.get("mem_total")
        if point.get("type") != "node" or point.get("stale") or not used or not total:
            continue
        latest[point["node"]] = NodeMemory(host_bytes=int(used), host_total_bytes=int(total))
    return latest
