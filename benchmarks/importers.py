"""Existing results to per-level results: perf_analyzer CSV and Model Analyzer summary CSV.

Both map to the level dicts of analysis.py. perf_analyzer (`-f out.csv`) writes latencies in
microseconds; Model Analyzer's metrics-model-inference.csv writes milliseconds and may hold
several model configs: the default config's rows are taken (else the first config's).
Bad input raises ImportError_ naming the line.
"""

from __future__ import annotations

import csv
import io

PERF_ANALYZER_REQUIRED = ("Concurrency", "Inferences/Second", "p99 latency")
MODEL_ANALYZER_REQUIRED = ("Concurrency", "Throughput (infer/sec)", "p99 Latency (ms)")


class BenchmarkImportError(Exception):
    """A file that cannot be read as the format claimed; `line` is 1-based when known."""

    def __init__(self, message: str, *, line: int | None = None):
        super().__init__(message)
        self.message, self.line = message, line


def _rows(text: str, required: tuple[str, ...], fmt: str) -> list[tuple[int, dict]]:
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [name.strip() for name in reader.fieldnames or []]
    missing = [name for name in required if name not in header]
    if missing:
        raise BenchmarkImportError(
            f"Not a {fmt} CSV: the header lacks {', '.join(repr(m) for m in missing)}.", line=1
        )
    rows = []
    for row in reader:
        clean = {(k or "").strip(): (v or "").strip() for k, v in row.items() if k}
        if any(clean.values()):
            rows.append((reader.line_num, clean))
    if not rows:
        raise BenchmarkImportError(f"The {fmt} CSV has a header but no rows.", line=2)
    return rows


def _number(row: dict, column: str, line: int, *, scale: float = 1.0) -> float | None:
    raw = row.get(column, "")
    if raw == "":
        return None
    try:
        return round(float(raw) * scale, 3)
    except ValueError:
        raise BenchmarkImportError(
            f"Column '{column}' holds {raw!r}, which is not a number.", line=line
        ) from None


def _concurrency(row: dict, line: int) -> int:
    value = _number(row, "Concurrency", line)
    if value is None or value < 1 or value != int(value):
        raise BenchmarkImportError(
            f"Concurrency must be a whole number of at least 1, not {row.get('Concurrency')!r}.",
            line=line,
        )
    return int(value)


def _level(concurrency: int, throughput: float | None, line: int) -> dict:
    if throughput is None:
        raise BenchmarkImportError("The throughput column is empty.", line=line)
    return {
        "concurrency": concurrency,
        "requests": None,
        "errors": None,
        "duration_s": None,
        "throughput_rps": throughput,
    }


def parse_perf_analyzer(text: str) -> list[dict]:
    """Levels from `perf_analyzer -f out.csv` (one row per concurrency, latencies in µs)."""
    us = 0.001
    levels = []
    for line, row in _rows(text, PERF_ANALYZER_REQUIRED, "perf_analyzer"):
        level = _level(_concurrency(row, line), _number(row, "Inferences/Second", line), line)
        for pct in (50, 90, 95, 99):
            level[f"p{pct}_ms"] = _number(row, f"p{pct} latency", line, scale=us)
        level["client_avg_ms"] = _number(row, "Avg latency", line, scale=us)
        level["server_queue_ms"] = _number(row, "Server Queue", line, scale=us)
        level["server_compute_ms"] = _number(row, "Server Compute Infer", line, scale=us)
        level["server_compute_input_ms"] = _number(row, "Server Compute Input", line, scale=us)
        level["server_compute_output_ms"] = _number(row, "Server Compute Output", line, scale=us)
        levels.append(level)
    return _sorted_unique(levels)


def _model_analyzer_rows(rows: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    configs = [row.get("Model Config Path", "") for _, row in rows]
    chosen = next((c for c in configs if c.endswith("config_default")), configs[0])
    return [(line, row) for line, row in rows if row.get("Model Config Path", "") == chosen]


def parse_model_analyzer(text: str) -> list[dict]:
    """Levels from Model Analyzer's metrics-model-inference.csv (latencies in ms)."""
    rows = _rows(text, MODEL_ANALYZER_REQUIRED, "Model Analyzer")
    levels = []
    for line, row in _model_analyzer_rows(rows):
        level = _level(_concurrency(row, line), _number(row, "Throughput (infer/sec)", line), line)
        for pct in (50, 90, 95, 99):
            level[f"p{pct}_ms"] = _number(row, f"p{pct} Latency (ms)", line)
        level["client_avg_ms"] = _number(row, "Avg Latency (ms)", line)
        level["server_queue_ms"] = _number(row, "Server Queue (ms)", line)
        level["server_compute_ms"] = _number(row, "Server Compute Infer (ms)", line)
        levels.append(level)
    return _sorted_unique(levels)


def _sorted_unique(levels: list[dict]) -> list[dict]:
    seen: dict[int, dict] = {}
    for level in levels:
        if level["concurrency"] in seen:
            raise BenchmarkImportError(
                f"Concurrency {level['concurrency']} appears twice; one row per level."
            )
        seen[level["concurrency"]] = level
    return [seen[c] for c in sorted(seen)]


PARSERS = {"perf_analyzer": parse_perf_analyzer, "model_analyzer": parse_model_analyzer}
