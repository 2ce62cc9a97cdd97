"""Prometheus source mode: the collector's per (node, model, version) numbers computed from
a Prometheus server's HTTP API (`/api/v1/query`, rate() over a window) instead of scraping.

Pure query building and result assembly, plus a small Source that runs the queries
concurrently. Nodes are matched on Prometheus's `instance` label (host:port of the node's
metrics URL); a node whose `up` is 0 or absent is stale. rate() already handles counter
resets, so a restart never shows a negative rate here either.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import defaultdict
from urllib.parse import urlencode

from integrations.triton.metrics import GpuInterval, IntervalStats, ModelInterval
from telemetry.collector import FetchFn, NodeResult, Source
from telemetry.rollups import SeriesDelta
from telemetry.scrape import ScrapeError, http_get

_BY_SERIES = "instance, model, version"
_RATES = {
    "success": "nv_inference_request_success",
    "request_us": "nv_inference_request_duration_us",
    "queue_us": "nv_inference_queue_duration_us",
    "compute_input_us": "nv_inference_compute_input_duration_us",
    "compute_infer_us": "nv_inference_compute_infer_duration_us",
    "compute_output_us": "nv_inference_compute_output_duration_us",
    "inference_count": "nv_inference_count",
    "exec_count": "nv_inference_exec_count",
    # A generative model's own count (the vLLM backend's name; examples/token_stream too):
    # absent for a model that counts none.
    "output_tokens": "vllm:generation_tokens_total",
}
_GAUGES = {
    "cpu": "nv_cpu_utilization",
    "mem_used": "nv_cpu_memory_used_bytes",
    "mem_total": "nv_cpu_memory_total_bytes",
    "gpu_util": "nv_gpu_utilization",
    "gpu_mem_used": "nv_gpu_memory_used_bytes",
    "gpu_mem_total": "nv_gpu_memory_total_bytes",
    "gpu_power": "nv_gpu_power_usage",
    "gpu_power_limit": "nv_gpu_power_limit",
}
Vector = list[tuple[dict[str, str], float]]


def instance_selector(instances: list[str]) -> str:
    """`instance=~"a|b"` with regex metacharacters escaped, as a PromQL string literal."""
    pattern = "|".join(re.escape(i) for i in sorted(instances))
    return 'instance=~"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'


def window(interval_s: float) -> str:
    """The rate() window: a few scrape intervals, so every series has at least two samples."""
    return f"{max(5, math.ceil(interval_s * 3))}s"


def build_queries(instances: list[str], interval_s: float) -> dict[str, str]:
    """Name -> PromQL for every number the collector publishes for these instances."""
    sel, w = instance_selector(instances), window(interval_s)
    queries = {
        name: f"sum by ({_BY_SERIES}) (rate({metric}{{{sel}}}[{w}]))"
        for name, metric in _RATES.items()
    }
    queries["failure"] = (
        f"sum by ({_BY_SERIES}, reason) (rate(nv_inference_request_failure{{{sel}}}[{w}]))"
    )
    queries["pending"] = f"sum by ({_BY_SERIES}) (nv_inference_pending_request_count{{{sel}}})"
    queries["p99"] = (
        f'max by ({_BY_SERIES}) (nv_inference_request_summary_us{{{sel},quantile="0.99"}})'
    )
    queries.update({name: f"{metric}{{{sel}}}" for name, metric in _GAUGES.items()})
    queries["up"] = f"up{{{sel}}}"
    return queries


def parse_vector(body: str) -> Vector:
    """An instant-vector answer of /api/v1/query -> [(labels, value)]; ValueError otherwise."""
    answer = json.loads(body)
    if answer.get("status") != "success":
        raise ValueError(f"prometheus: {answer.get('errorType')}: {answer.get('error')}")
    data = answer["data"]
    if data.get("resultType") != "vector":
        raise ValueError(f"prometheus: expected a vector, got {data.get('resultType')}")
    return [(row["metric"], float(row["value"][1])) for row in data["result"]]


def _per_series(vector: Vector) -> dict[tuple[str, str, str], float]:
    return {
        (m.get("instance", ""), m.get("model", ""), m.get("version", "")): v
        for m, v in vector
        if math.isfinite(v)
    }


def _div(num: float | None, den: float | None, scale: float = 1.0) -> float | None:
    return num / den * scale if num is not None and den else None


def _series(key, r: dict[str, dict], failures: dict[str, float], dt_s: float) -> ModelInterval:
    ok = r["success"][key]
    total = ok + sum(failures.values())
    compute = [r[f"compute_{p}_us"].get(key) for p in ("input", "infer", "output")]
    p99 = r["p99"].get(key)
    tokens = r["output_tokens"].get(key)
    return ModelInterval(
        model=key[1],
        version=key[2],
        status="ok",
        labels={},
        pending=r["pending"].get(key, 0.0),
        p50_ms=None,
        p99_ms=p99 / 1000.0 if p99 is not None else None,
        request_rate=total,
        success_rate_pct=_div(ok, total, 100.0),
        failures={k: v * dt_s for k, v in sorted(failures.items()) if v},
        avg_request_ms=_div(r["request_us"].get(key), ok, 1e-3),
        avg_queue_ms=_div(r["queue_us"].get(key), ok, 1e-3),
        avg_compute_ms=None if None in compute else _div(sum(compute), ok, 1e-3),
        avg_batch_size=_div(r["inference_count"].get(key), r["exec_count"].get(key)),
        output_tokens_rate=tokens,
        output_tokens_per_request=_div(tokens, total),
    )


def _delta(s: ModelInterval, r: dict[str, dict], key, dt_s: float) -> SeriesDelta:
    ok = r["success"][key] * dt_s
    compute = sum(r[f"compute_{p}_us"].get(key, 0.0) for p in ("input", "infer", "output"))
    return SeriesDelta(
        requests=(s.request_rate or 0.0) * dt_s,
        successes=ok,
        failures=sum(s.failures.values()),
        request_us=r["request_us"].get(key, 0.0) * dt_s,
        queue_us=r["queue_us"].get(key, 0.0) * dt_s,
        compute_us=compute * dt_s,
        p99_ms=s.p99_ms,
        output_tokens=(s.output_tokens_rate or 0.0) * dt_s,
    )


def _by_instance(vector: Vector, label: str = "") -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for m, v in vector:
        out[m.get("instance", "")][m.get(label, "") if label else ""] = v
    return out


def _gpus(results: dict[str, Vector], instance: str) -> list[GpuInterval]:
    per = {k: _by_instance(results[k], "gpu_uuid").get(instance, {}) for k in _GAUGES}
    return [
        GpuInterval(
            gpu_uuid=uuid,
            utilization=util,
            memory_used_bytes=per["gpu_mem_used"].get(uuid),
            memory_total_bytes=per["gpu_mem_total"].get(uuid),
            power_w=per["gpu_power"].get(uuid),
            power_limit_w=per["gpu_power_limit"].get(uuid),
            avg_power_w=None,
        )
        for uuid, util in sorted(per["gpu_util"].items())
    ]


def assemble(
    cluster: str, instances: dict[str, str], results: dict[str, Vector], dt_s: float
) -> list[NodeResult]:
    """NodeResults of one cluster from the answers of build_queries' queries."""
    r = {name: _per_series(results[name]) for name in (*_RATES, "pending", "p99")}
    failures: dict[tuple, dict[str, float]] = defaultdict(dict)
    for m, v in results["failure"]:
        key = (m.get("instance", ""), m.get("model", ""), m.get("version", ""))
        failures[key][m.get("reason", "")] = v if math.isfinite(v) else 0.0
    up = {m.get("instance", ""): v for m, v in results["up"]}
    gauges = {k: _by_instance(results[k]) for k in ("cpu", "mem_used", "mem_total")}
    out = []
    for instance, node in sorted(instances.items(), key=lambda kv: kv[1]):
        if up.get(instance) != 1.0:
            out.append(NodeResult(cluster, node, None, error="down in prometheus"))
            continue
        keys = sorted(k for k in r["success"] if k[0] == instance)
        models = [_series(k, r, failures.get(k, {}), dt_s) for k in keys]
        deltas = {(k[1], k[2]): _delta(s, r, k, dt_s) for k, s in zip(keys, models, strict=True)}
        node_gauge = {k: g.get(instance, {}).get("") for k, g in gauges.items()}
        stats = IntervalStats(
            dt_s=dt_s,
            models=models,
            cpu_utilization=node_gauge["cpu"],
            memory_used_bytes=node_gauge["mem_used"],
            memory_total_bytes=node_gauge["mem_total"],
            gpus=_gpus(results, instance),
        )
        out.append(NodeResult(cluster, node, stats, deltas))
    return out


class PrometheusSource(Source):
    """Runs one cluster's queries concurrently each tick; Prometheus down = every node stale."""

    def __init__(self, cluster, interval_s: float, *, fetch: FetchFn = http_get) -> None:
        self.cluster, self.interval_s, self.fetch = cluster, interval_s, fetch
        self.last_at: float | None = None

    async def _query(self, promql: str, now: float) -> Vector:
        url = f"{self.cluster.url.rstrip('/')}/api/v1/query?" + urlencode(
            {"query": promql, "time": f"{now:.3f}"}
        )
        return parse_vector(await self.fetch(url, max(1.0, self.interval_s)))

    async def collect(self, now: float) -> list[NodeResult]:
        instances = dict(self.cluster.instances)
        dt_s = self.interval_s if self.last_at is None else max(now - self.last_at, 1e-3)
        self.last_at = now
        queries = build_queries(list(instances), self.interval_s)
        try:
            answers = await asyncio.gather(*(self._query(q, now) for q in queries.values()))
        except (ScrapeError, ValueError, KeyError) as exc:
            return [
                NodeResult(self.cluster.cluster, node, None, error=f"prometheus: {exc}")
                for node in instances.values()
            ]
        return assemble(
            self.cluster.cluster, instances, dict(zip(queries, answers, strict=True)), dt_s
        )
