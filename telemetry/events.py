"""Websocket group names and payload builders of live telemetry (one module per app).

The collector sends one channel-layer message per group and tick (`telemetry.batch`,
carrying a list of payloads); consumers relay each payload as its own websocket message.
Points with `node == ""` aggregate a model version over every node of the cluster.
"""

from __future__ import annotations

from typing import Any

from integrations.triton.metrics import IntervalStats, ModelInterval

ALL_NODES = ""


def cluster_group(name: str) -> str:
    return f"cluster-{name}"


def model_group(name: str) -> str:
    return f"model-{name}"


def batch(payloads: list[dict]) -> dict:
    """A channel-layer message: consumers relay each payload to their client."""
    return {"type": "telemetry.batch", "payloads": payloads}


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def model_point(
    *, ts: float, cluster: str, node: str, series: ModelInterval, status: str | None = None
) -> dict[str, Any]:
    """The live point of one model version on one node (or all nodes when node is '')."""
    return {
        "type": "point",
        "ts": round(ts, 3),
        "cluster": cluster,
        "node": node,
        "model": series.model,
        "version": series.version,
        "request_rate": _round(series.request_rate),
        "success_rate": _round(series.success_rate_pct),
        "avg_ms": _round(series.avg_request_ms),
        "p99_ms": _round(series.p99_ms),
        "queue_ms": _round(series.avg_queue_ms),
        "compute_ms": _round(series.avg_compute_ms),
        "batch_size": _round(series.avg_batch_size),
        # A generative model's output tokens per second (its own counter), None otherwise.
        "tokens_per_s": _round(series.output_tokens_rate),
        "failures": series.failures,
        "pending": series.pending,
        "status": status or series.status,
    }


def node_point(
    *, ts: float, cluster: str, node: str, stats: IntervalStats | None, error: str = ""
) -> dict[str, Any]:
    """The live point of one node: CPU, memory, GPUs; `stale` when it did not answer."""
    gpus = []
    if stats is not None:
        gpus = [
            {
                "gpu_uuid": g.gpu_uuid,
                "util": _round(g.utilization, 4),
                "mem_used": g.memory_used_bytes,
                "mem_total": g.memory_total_bytes,
                "power_w": _round(g.power_w, 1),
            }
            for g in stats.gpus
        ]
    return {
        "type": "node",
        "ts": round(ts, 3),
        "cluster": cluster,
        "node": node,
        "cpu_util": _round(stats.cpu_utilization, 4) if stats else None,
        "mem_used": stats.memory_used_bytes if stats else None,
        "mem_total": stats.memory_total_bytes if stats else None,
        "gpus": gpus,
        "stale": stats is None,
        "error": error,
    }
