"""How well the benchmark runner's client-side throughput matches what Triton served.

Starts one real Triton node, then per concurrency level runs the runner's `run_level` on the
risk_score example (v2, loaded under a temporary name as a benchmark does) and, around it,
scrapes Triton's own counter `nv_inference_request_success` for that model from /metrics
with this script's clock. Prints per level:
* client-measured throughput / server-side throughput over the same window (goal within 3%:
  a ratio between 0.97 and 1.03);
* client request count / Triton's count (the runner's stats delta; expected exactly 1).
Usage: .venv/bin/python bench/benchmark_accuracy.py [seconds per level]
"""

import json
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")

import django  # noqa: E402

django.setup()

from google.protobuf import json_format, text_format  # noqa: E402
from tritonclient.grpc import model_config_pb2  # noqa: E402

from bench.common import bench_node_key  # noqa: E402
from benchmarks.runner import SweepSpec, _load, _unload_quietly, _warm_up, run_level  # noqa: E402
from deployments.push import LoadPlan  # noqa: E402
from integrations.triton.client import TritonClient  # noqa: E402
from integrations.triton.local import start_cluster  # noqa: E402

EXAMPLE = ROOT / "examples" / "model_repository" / "risk_score"
LEVELS = (1, 4, 8)


def _plan(temp_name: str) -> LoadPlan:
    config = model_config_pb2.ModelConfig()
    text_format.Parse((EXAMPLE / "config.pbtxt").read_text(), config)
    config.name = temp_name
    files = {f"1/{p.name}": p.read_bytes() for p in (EXAMPLE / "2").iterdir() if p.is_file()}
    as_dict = json_format.MessageToDict(config, preserving_proto_field_name=True)
    return LoadPlan(temp_name, [1], json.dumps(as_dict), as_dict, files)


def _served(metrics_url: str, model: str) -> int:
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()  # noqa: S310 (http only)
    pattern = rf'^nv_inference_request_success{{model="{re.escape(model)}",version="1"}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


def _measure(node, spec: SweepSpec) -> list[tuple[int, float, float]]:
    rows = []
    with TritonClient(node.http_url, node.grpc_url, node_key=node.node_key) as client:
        _load(client, spec)
        try:
            _warm_up(client, spec)
            for index, concurrency in enumerate(spec.concurrency):
                before, started = _served(node.metrics_url, spec.temp_name), time.perf_counter()
                level, _ = run_level(client, spec, index, lambda *_: False)
                window = time.perf_counter() - started
                served = _served(node.metrics_url, spec.temp_name) - before
                ratio = level["throughput_rps"] / (served / window)
                rows.append((concurrency, ratio, level["requests"] / level["server_requests"]))
                print(
                    f"concurrency {concurrency:2d}: client {level['throughput_rps']:8.1f} req/s, "
                    f"server {served / window:8.1f} req/s -> ratio {ratio:.4f}; requests "
                    f"{level['requests']} client / {level['server_requests']} server"
                )
        finally:
            _unload_quietly(client, spec.temp_name)
    return rows


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    with tempfile.TemporaryDirectory() as work:
        cluster = start_cluster(1, Path(work), metrics_interval_ms=1000, node_key=bench_node_key())
        try:
            node = cluster.nodes[0]
            name = "risk_score--bench-accuracy"
            spec = SweepSpec(_plan(name), 1, name, LEVELS, seconds)
            rows = _measure(node, spec)
        finally:
            cluster.stop()
    worst = max(abs(ratio - 1) for _, ratio, _ in rows)
    exact = all(count == 1 for _, _, count in rows)
    print(f"worst client/server throughput ratio off by {worst * 100:.2f}% (goal within 3%)")
    print(f"client and server request counts equal on every level: {exact}")


if __name__ == "__main__":
    main()
