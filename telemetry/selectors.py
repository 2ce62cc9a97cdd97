"""Reads for telemetry: what the collector watches, and rollup time series."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.db.models import Avg, F, Max, Sum

from deployments.models import TritonCluster, TritonNode
from deployments.validation import cluster_metrics, node_urls_check
from integrations.metrics_source import MetricsSettings, MetricsSettingsError
from telemetry.collector import Target
from telemetry.models import Rollup

MAX_POINTS = 20000
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


def _ratio(num, den, scale=1.0):
    return round(num / den * scale, 3) if num is not None and den else None


def _model_point(row: dict) -> dict:
    requests, successes = row["requests"] or 0, row["successes"] or 0
    return {
        "ts": row["minute"].isoformat(),
        "cluster": row["cluster__name"],
        "model": row["model_name"],
        "version": row["version"],
        "requests": requests,
        "failures": row["failures"] or 0,
        "request_rate": round(requests / 60.0, 3),
        "success_rate": _ratio(successes, requests, 100.0),
        "avg_ms": _ratio(row["request_us"], successes, 1e-3),
        "queue_ms": _ratio(row["queue_us"], successes, 1e-3),
        "compute_ms": _ratio(row["compute_us"], successes, 1e-3),
        "p99_ms": row["p99_ms"],
    }


def metric_series(
    *,
    since: datetime,
    until: datetime | None = None,
    cluster: str = "",
    model: str = "",
    version: str = "",
    node: str = "",
) -> list[dict]:
    """Per-minute points per (cluster, model, version), summed over nodes unless `node`."""
    rows = Rollup.objects.filter(minute__gte=since).exclude(model_name="")
    if until is not None:
        rows = rows.filter(minute__lt=until)
    for field, value in (
        ("cluster__name", cluster),
        ("model_name", model),
        ("version", version),
        ("node_name", node),
    ):
        if value:
            rows = rows.filter(**{field: value})
    grouped = (
        rows.values("minute", "cluster__name", "model_name", "version")
        .annotate(
            requests=Sum("requests"),
            successes=Sum("successes"),
            failures=Sum("failures"),
            request_us=Sum("request_us"),
            queue_us=Sum("queue_us"),
            compute_us=Sum("compute_us"),
            p99_ms=Max("p99_ms"),
        )
        .order_by("minute", "cluster__name", "model_name", F("version").asc())
    )
    return [_model_point(row) for row in grouped[:MAX_POINTS]]


def node_series(*, since: datetime, cluster: str, node: str = "") -> list[dict]:
    """Per-minute CPU and GPU utilization averages of each node of a cluster."""
    rows = Rollup.objects.filter(minute__gte=since, cluster__name=cluster, model_name="")
    if node:
        rows = rows.filter(node_name=node)
    grouped = rows.values("minute", "node_name").annotate(
        cpu=Avg("cpu_util_avg"), gpu=Avg("gpu_util_avg")
    )
    return [
        {
            "ts": r["minute"].isoformat(),
            "node": r["node_name"],
            "cpu_util": r["cpu"],
            "gpu_util": r["gpu"],
        }
        for r in grouped.order_by("minute", "node_name")[:MAX_POINTS]
    ]
