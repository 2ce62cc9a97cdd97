"""Time prometheus_client's reference parser against integrations.triton.metrics.parse_metrics.

The text is a real capture (tests/fixtures/metrics/multi_model.txt) whose risk_score v1 block
is replicated as 20 models x 2 versions = 40 model versions; other models are dropped.
Run: `.venv/bin/python bench/metrics_parse.py [iterations]`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from integrations.triton.metrics import parse_metrics  # noqa: E402

CAPTURE = ROOT / "tests" / "fixtures" / "metrics" / "multi_model.txt"
TEMPLATE = 'model="risk_score",version="1"'
MODELS, VERSIONS = 20, 2


def build_text() -> str:
    """The capture with the template model block replicated as MODELS x VERSIONS versions."""
    out = []
    for line in CAPTURE.read_text().splitlines():
        if TEMPLATE in line:
            for m in range(MODELS):
                for v in range(1, VERSIONS + 1):
                    out.append(line.replace(TEMPLATE, f'model="model_{m:02d}",version="{v}"'))
        elif 'model="' not in line:
            out.append(line)
    return "\n".join(out) + "\n"


def timed(fn: Callable[[str], object], text: str, iterations: int) -> float:
    """Seconds per call over `iterations` calls."""
    start = time.perf_counter()
    for _ in range(iterations):
        fn(text)
    return (time.perf_counter() - start) / iterations


def main() -> None:
    """Print per-call times of both parsers (best of interleaved rounds) and their ratio."""
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    text = build_text()
    snap = parse_metrics(text)
    print(f"text: {len(text)} bytes, {text.count(chr(10))} lines, {len(snap.models)} versions")
    ref = fast = float("inf")
    for n in range(5):  # interleaved, so load from elsewhere hits both alike
        ref_n = timed(lambda t: list(text_string_to_metric_families(t)), text, iterations)
        fast_n = timed(parse_metrics, text, iterations * 5)
        print(
            f"round {n + 1}: reference {ref_n * 1e3:.2f} ms/call, parse_metrics "
            f"{fast_n * 1e3:.2f} ms/call, ratio {ref_n / fast_n:.1f}x"
        )
        ref, fast = min(ref, ref_n), min(fast, fast_n)
    print("best of the rounds:")
    print(f"reference (prometheus_client): {ref * 1e3:.2f} ms/call")
    print(f"parse_metrics:                 {fast * 1e3:.2f} ms/call")
    print(f"ratio reference/fast:          {ref / fast:.1f}x")


if __name__ == "__main__":
    main()
