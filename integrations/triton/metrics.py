"""Parse Triton's Prometheus text and turn two scrapes into per-interval statistics.

Pure Python, no Django, no network. Facts this relies on are in docs/TRITON.md §metrics:

* only the families the collector reads are parsed (`READ_FAMILIES`); everything else is
  skipped before its labels are looked at; besides Triton's own (`nv_`), a generative
  model's token counters as the vLLM backend names them (`vllm:`);
* a line's head (name and labels) is parsed once and cached across calls, since every
  scrape of every node repeats the same heads; `Snapshot.samples` is built on demand;
* model series are keyed by (model, version); extra labels (`_<tag>` from `metric_tags`,
  `gpu_uuid`) are kept on the series and on the raw samples;
* after an unload Triton 2.51 keeps printing the model's `nv_inference_request_failure`
  series (captured: tests/fixtures/metrics/after_unload.txt), so a (model, version) counts as
  loaded only while its `nv_inference_request_success` series is there;
* the one restart rule for counter deltas, used by the collector, the rollups and release
  observation, is `counter_deltas`: a counter that went down means the node or the model
  restarted (or reloaded from zero), so that interval is dropped for that series (status
  "reset", no made-up counts) and the next interval starts from the new reading; a series
  missing from the previous reading has status "new" and no deltas either.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

ModelKey = tuple[str, str]

_SUMMARIES = {
    "nv_inference_request_summary_us": "request",
    "nv_inference_queue_summary_us": "queue",
    "nv_inference_compute_infer_summary_us": "compute_infer",
}
_MODEL_COUNTERS = {
    "nv_inference_request_success": "success",
    "nv_inference_count": "inference_count",
    "nv_inference_exec_count": "exec_count",
    "nv_inference_request_duration_us": "request_us",
    "nv_inference_queue_duration_us": "queue_us",
    "nv_inference_compute_input_duration_us": "compute_input_us",
    "nv_inference_compute_infer_duration_us": "compute_infer_us",
    "nv_inference_compute_output_duration_us": "compute_output_us",
    **{f"{name}_count": f"{short}_summary_count" for name, short in _SUMMARIES.items()},
    **{f"{name}_sum": f"{short}_summary_sum" for name, short in _SUMMARIES.items()},
    # A generative model's tokens, as the vLLM backend for Triton counts them (a model of
    # any backend may export the same counters from its code: examples/token_stream).
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "output_tokens",
}
# The prefixes of every family read (a line starting otherwise is skipped unparsed).
_PREFIXES = ("nv_", "vllm:")
_NODE = {
    "nv_cpu_utilization": "cpu_utilization",
    "nv_cpu_memory_total_bytes": "memory_total_bytes",
    "nv_cpu_memory_used_bytes": "memory_used_bytes",
}
_GPU = {
    "nv_gpu_utilization": "utilization",
    "nv_gpu_memory_total_bytes": "memory_total_bytes",
    "nv_gpu_memory_used_bytes": "memory_used_bytes",
    "nv_gpu_power_usage": "power_usage",
    "nv_gpu_power_limit": "power_limit",
    "nv_energy_consumption": "energy_consumption",
}
# Sample name -> (kind, field): how each line the collector reads is stored.
_WANTED: dict[str, tuple[str, str]] = {
    **{name: ("counter", short) for name, short in _MODEL_COUNTERS.items()},
    **{name: ("quantile", short) for name, short in _SUMMARIES.items()},
    "nv_inference_request_failure": ("failure", ""),
    "nv_inference_pending_request_count": ("pending", ""),
    **{name: ("node", short) for name, short in _NODE.items()},
    **{name: ("gpu", short) for name, short in _GPU.items()},
}
READ_FAMILIES: frozenset[str] = frozenset(_WANTED)
_KEY_LABELS = frozenset({"model", "version", "reason", "quantile"})
_LABEL_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPE_RE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}


# What a line's head means (see `_head`), and a line read: (head, value, timestamp).
_Head = tuple[str, dict[str, str], int, str, ModelKey, str, dict[str, str]]
_Line = tuple[_Head, float, float | None]


class Sample(NamedTuple):
    """One sample line: name, labels, value and the optional timestamp in seconds."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp: float | None = None


@dataclass(slots=True)
class ModelSeries:
    """What one scrape says about one (model, version); several label sets are summed."""

    labels: dict[str, str] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    failures: dict[str, float] = field(default_factory=dict)
    pending: float = 0.0
    quantiles: dict[str, dict[str, float]] = field(default_factory=dict)

    def quantile(self, summary: str, q: str) -> float | None:
        """The quantile series `q` (label text, e.g. "0.99") of a summary, or None."""
        return self.quantiles.get(summary, {}).get(q)


@dataclass(slots=True)
class Snapshot:
    """One parsed scrape: loaded model series, node gauges, GPU gauges and raw samples."""

    models: dict[ModelKey, ModelSeries] = field(default_factory=dict)
    node: dict[str, float] = field(default_factory=dict)
    gpus: dict[str, dict[str, float]] = field(default_factory=dict)
    _lines: list[_Line] = field(default_factory=list, repr=False)

    @property
    def samples(self) -> list[Sample]:
        """Every line read, in text order, as a new list of Samples with their own labels.

        Built on demand: the collector reads only the series, and building a Sample per
        line cost a third of the parse.
        """
        return [Sample(head[0], head[1].copy(), value, ts) for head, value, ts in self._lines]


def _unescape(value: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], value) if "\\" in value else value


def _parse_labels(body: str) -> dict[str, str]:
    """Label text between the braces -> dict; a split fast path, a regex for the rest."""
    if "\\" not in body:
        labels = {}
        for part in body.split('",'):
            if not part:
                continue
            key, sep, value = part.partition('="')
            if not sep or not key.isidentifier() or '"' in value[:-1]:
                break
            labels[key] = value[:-1] if value.endswith('"') else value
        else:
            return labels
    labels, pos = {}, 0
    for match in _LABEL_RE.finditer(body):
        if match.start() != pos:
            raise ValueError(f"invalid labels: {body!r}")
        labels[match.group(1)] = _unescape(match.group(2))
        pos = match.end()
    if body[pos:].strip():
        raise ValueError(f"invalid labels: {body!r}")
    return labels


# Kinds of line, as small ints so the per-line dispatch is cheap, and the label that tells
# a kind's series apart within a (model, version) or a node.
_COUNTER, _QUANTILE, _FAILURE, _PENDING, _NODE_GAUGE, _GPU_GAUGE = range(6)
_KINDS = {
    "counter": _COUNTER,
    "quantile": _QUANTILE,
    "failure": _FAILURE,
    "pending": _PENDING,
    "node": _NODE_GAUGE,
    "gpu": _GPU_GAUGE,
}
_SUB_LABEL = {_QUANTILE: "quantile", _FAILURE: "reason", _GPU_GAUGE: "gpu_uuid"}
# What a line's head (name and label text, up to the last "}") means; None: not read. The
# same heads come back on every scrape of every node, so the cache lives across calls and
# holds a few entries per series; entries are never mutated (Samples get label copies).
_HEADS: dict[str, _Head | None] = {}
_HEADS_MAX = 100_000


def _head(name: str, body: str | None) -> _Head:
    """(name, labels, kind, field, (model, version), quantile/reason/gpu_uuid, extra labels)."""
    kind, short = _KINDS[_WANTED[name][0]], _WANTED[name][1]
    labels = {} if body is None else _parse_labels(body)
    key = (labels.get("model", ""), labels.get("version", ""))
    sub = labels.get(_SUB_LABEL[kind], "") if kind in _SUB_LABEL else ""
    extra = {k: v for k, v in labels.items() if k not in _KEY_LABELS}
    return name, labels, kind, short, key, sub, extra


def _remember(head: str, name: str, body: str | None) -> _Head | None:
    found = _head(name, body) if name in _WANTED else None
    if len(_HEADS) >= _HEADS_MAX:
        _HEADS.clear()
    _HEADS[head] = found
    return found


def _value(rest: str) -> tuple[float, float | None]:
    """Value and the optional timestamp (ms in the text, seconds here) after the labels."""
    tokens = rest.split()
    return float(tokens[0]), (float(tokens[-1]) / 1000 if len(tokens) > 1 else None)


def _slow_line(line: str) -> _Line | None:
    """A line whose head is not cached yet, or has no labels: the general split."""
    brace = line.find("{")
    if brace == -1:
        name, *tokens = line.split()
        found = _HEADS.get(name, False)
        if found is False:
            found = _remember(name, name, None)
        return None if found is None else (found, *_value(" ".join(tokens)))
    name, close = line[:brace].rstrip(), line.rfind("}")
    if name not in _WANTED:  # cache the miss too, unless the line has no "}" to key it by
        if close != -1:
            _remember(line[: close + 1], name, None)
        return None
    if close == -1:
        raise ValueError(f"no closing brace: {line!r}")
    found = _remember(line[: close + 1], name, line[brace + 1 : close])
    return None if found is None else (found, *_value(line[close + 1 :]))


def _read_lines(text: str) -> list[_Line]:
    """(head, value, timestamp) of every line the collector reads, in text order.

    The collector's hot loop: a line costs an rfind, a slice and a cache lookup; labels are
    parsed once per distinct head, and lines of families not read stop at the lookup.
    """
    out: list[_Line] = []
    append, heads = out.append, _HEADS
    for line in text.splitlines():
        if not line.startswith(_PREFIXES):
            line = line.strip()
            if not line.startswith(_PREFIXES):
                continue
        close = line.rfind("}")
        found = heads.get(line[: close + 1], False) if close != -1 else False
        if found is False:
            parsed = _slow_line(line)
            if parsed is not None:
                append(parsed)
        elif found is not None:
            try:  # almost always a lone value; a timestamp takes the general split
                append((found, float(line[close + 1 :]), None))
            except ValueError:
                append((found, *_value(line[close + 1 :])))
    return out


def _new_series(series: dict[ModelKey, ModelSeries], key: ModelKey, extra: dict) -> ModelSeries:
    one = series[key] = ModelSeries(labels=dict(extra))
    return one


def parse_metrics(text: str) -> Snapshot:
    """Parse a /metrics text into a Snapshot of the families the collector reads."""
    snap = Snapshot()
    series: dict[ModelKey, ModelSeries] = {}
    node, gpus = snap.node, snap.gpus
    snap._lines = lines = _read_lines(text)
    for (_, _, kind, short, key, sub, extra), value, _ in lines:
        if kind == _COUNTER:
            counters = (series.get(key) or _new_series(series, key, extra)).counters
            counters[short] = counters.get(short, 0.0) + value
        elif kind == _QUANTILE:  # with several label sets keep the largest, never average
            per_q = (series.get(key) or _new_series(series, key, extra)).quantiles
            per_q = per_q.get(short) or per_q.setdefault(short, {})  # no {} built per line
            old = per_q.get(sub)
            per_q[sub] = value if old is None or math.isnan(old) or value > old else old
        elif kind == _FAILURE:
            failures = (series.get(key) or _new_series(series, key, extra)).failures
            failures[sub] = failures.get(sub, 0.0) + value
        elif kind == _PENDING:
            (series.get(key) or _new_series(series, key, extra)).pending += value
        elif kind == _NODE_GAUGE:
            node[short] = value
        else:
            gpus.setdefault(sub, {})[short] = value
    snap.models = {k: s for k, s in series.items() if "success" in s.counters}
    return snap


# ---------------------------------------------------------------- intervals


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _ratio(num: float | None, den: float | None, scale: float = 1.0) -> float | None:
    if num is None or not den:
        return None
    return _finite(num / den * scale)


@dataclass
class ModelInterval:
    """One (model, version) over one interval; status is "ok", "reset" or "new".

    Rates are per second, latencies in ms, `failures` counts failed requests per reason in
    the interval. Failed executions count in exec_count but not in inference_count
    (captured), so a failing version shows an average batch below 1.
    """

    model: str
    version: str
    status: str
    labels: dict[str, str]
    pending: float
    p50_ms: float | None
    p99_ms: float | None
    request_rate: float | None = None
    success_rate_pct: float | None = None
    failures: dict[str, float] = field(default_factory=dict)
    avg_request_ms: float | None = None
    avg_queue_ms: float | None = None
    avg_compute_ms: float | None = None
    avg_batch_size: float | None = None
    # A generative model's output tokens per second and per request (None where it does
    # not count them: `vllm:generation_tokens_total`).
    output_tokens_rate: float | None = None
    output_tokens_per_request: float | None = None


@dataclass
class GpuInterval:
    """One GPU's gauges now, plus the average power from the energy counter's delta."""

    gpu_uuid: str
    utilization: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    power_w: float | None
    power_limit_w: float | None
    avg_power_w: float | None


@dataclass
class IntervalStats:
    """Everything the collector publishes for one node and one interval."""

    dt_s: float
    models: list[ModelInterval]
    cpu_utilization: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    gpus: list[GpuInterval]

    def as_dict(self) -> dict[str, Any]:
        """Plain dicts and lists, ready for json.dumps."""
        return asdict(self)


def counter_deltas(
    before: Mapping[str, float] | None, now: Mapping[str, float]
) -> dict[str, float] | None:
    """How much each counter grew between two readings of one series on one node.

    The restart rule, the only one in Switchyard: None (the interval is dropped, nothing is
    counted) when there is no earlier reading or when any counter went down, which means the
    node or the model restarted between the readings; the caller then starts the next
    interval from `now`. Counters missing from either reading are left out.
    """
    if before is None:
        return None
    deltas = {k: v - before[k] for k, v in now.items() if k in before}
    return None if any(d < 0 for d in deltas.values()) else deltas


def series_deltas(
    before: ModelSeries | None, now: ModelSeries
) -> tuple[dict[str, float], dict[str, float]] | None:
    """Counter and per-reason failure deltas of a model series (`counter_deltas`'s rule)."""
    if before is None:
        return None
    counters = counter_deltas(before.counters, now.counters)
    failures = counter_deltas(before.failures, now.failures)
    return None if counters is None or failures is None else (counters, failures)


def _model_interval(
    key: ModelKey, before: ModelSeries | None, now: ModelSeries, dt_s: float
) -> ModelInterval:
    """Rates and averages of one series; gauges and quantiles also for reset or new ones."""
    out = ModelInterval(
        model=key[0],
        version=key[1],
        status="new" if before is None else "ok",
        labels=dict(now.labels),
        pending=now.pending,
        p50_ms=_ratio(now.quantile("request", "0.5"), 1000.0),
        p99_ms=_ratio(now.quantile("request", "0.99"), 1000.0),
    )
    deltas = series_deltas(before, now)
    if deltas is None:
        out.status = "new" if before is None else "reset"
        return out
    d, failures = deltas
    success = d.get("success", 0.0)
    total = success + sum(failures.values())
    compute = [d.get(f"compute_{part}_us") for part in ("input", "infer", "output")]
    out.request_rate = total / dt_s
    out.success_rate_pct = _ratio(success, total, 100.0)
    out.failures = {reason: n for reason, n in sorted(failures.items()) if n}
    out.avg_request_ms = _ratio(d.get("request_us"), success, 1e-3)
    out.avg_queue_ms = _ratio(d.get("queue_us"), success, 1e-3)
    out.avg_compute_ms = None if None in compute else _ratio(sum(compute), success, 1e-3)
    out.avg_batch_size = _ratio(d.get("inference_count"), d.get("exec_count"))
    if "output_tokens" in d:
        out.output_tokens_rate = d["output_tokens"] / dt_s
        out.output_tokens_per_request = _ratio(d["output_tokens"], total)
    return out


_ENERGY = "energy_consumption"


def _energy(reading: dict[str, float]) -> dict[str, float]:
    return {_ENERGY: reading[_ENERGY]} if _ENERGY in reading else {}


def _gpu_interval(
    uuid: str, before: dict[str, float] | None, now: dict[str, float], dt_s: float
) -> GpuInterval:
    """Gauges now; average watts from the energy counter (None without a prior or on reset)."""
    before_energy = None if before is None else _energy(before)
    spent = (counter_deltas(before_energy, _energy(now)) or {}).get(_ENERGY)
    return GpuInterval(
        gpu_uuid=uuid,
        utilization=_finite(now.get("utilization")),
        memory_used_bytes=_finite(now.get("memory_used_bytes")),
        memory_total_bytes=_finite(now.get("memory_total_bytes")),
        power_w=_finite(now.get("power_usage")),
        power_limit_w=_finite(now.get("power_limit")),
        avg_power_w=_ratio(spent, dt_s),
    )


def _version_order(key: ModelKey) -> tuple[str, int, str]:
    model, version = key
    return model, int(version) if version.isdigit() else -1, version


def compute_interval(prev: Snapshot, cur: Snapshot, dt_s: float) -> IntervalStats:
    """Per-series rates and averages between two scrapes of one node taken dt_s apart."""
    if dt_s <= 0:
        raise ValueError(f"dt_s must be positive, got {dt_s}")
    models = [
        _model_interval(key, prev.models.get(key), cur.models[key], dt_s)
        for key in sorted(cur.models, key=_version_order)
    ]
    gpus = [
        _gpu_interval(uuid, prev.gpus.get(uuid), values, dt_s)
        for uuid, values in sorted(cur.gpus.items())
    ]
    return IntervalStats(
        dt_s=dt_s,
        models=models,
        cpu_utilization=_finite(cur.node.get("cpu_utilization")),
        memory_used_bytes=_finite(cur.node.get("memory_used_bytes")),
        memory_total_bytes=_finite(cur.node.get("memory_total_bytes")),
        gpus=gpus,
    )
