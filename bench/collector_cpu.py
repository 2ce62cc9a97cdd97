"""Collector CPU cost: 100 nodes x 20 models x 2 versions, 2 s interval, served by nginx.

Run from the repository root: `.venv/bin/python bench/collector_cpu.py [seconds]
[--no-publish]` (the flag leaves out the channel layer, to show its share).
Builds each node's /metrics text from a real capture (tests/fixtures/metrics/pair_*.txt,
risk_score v2/v3 replicated as 20 models x 2 versions), serves 100 URLs from a throwaway
nginx (loopback, tmp prefix), runs the real Collector (scrape, parse, intervals, points,
group_send over the Redis channel layer, rollup accumulation) and prints the CPU cores it
used. Two captures alternate per scrape so counters move. Goal: under 0.5 cores.
"""

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.test")

NODES, MODELS = 100, 20
FIXTURES = ROOT / "tests" / "fixtures" / "metrics"
# Failure lines carry `reason` between model and version: they are grown like the rest.
_SERIES = re.compile(r'model="risk_score",(reason="[A-Z]+",)?version="([23])"')


def grown(capture: str) -> str:
    """The capture with risk_score v2/v3 lines repeated for MODELS models, versions 1 and 2."""
    out = []
    for line in capture.splitlines():
        match = _SERIES.search(line)
        if match is None:
            out.append(line)
            continue
        reason, version = match.group(1) or "", "1" if match.group(2) == "2" else "2"
        for i in range(MODELS):
            out.append(_SERIES.sub(f'model="model_{i:02d}",{reason}version="{version}"', line))
    return "\n".join(out) + "\n"


def start_nginx(work: Path) -> tuple[subprocess.Popen | None, int]:
    from integrations.triton.local import free_ports

    (port,) = free_ports(1)
    work.chmod(0o755)  # nginx workers run as an unprivileged user when started as root
    texts = [grown((FIXTURES / f"pair_{w}.txt").read_text()) for w in ("before", "after")]
    for i in range(NODES):
        for j, text in enumerate(texts):
            folder = work / "www" / f"n{i}" / str(j)
            folder.mkdir(parents=True)
            (folder / "metrics").write_text(text)
    for sub in ("logs", "temp"):
        (work / sub).mkdir()
    temp = " ".join(
        f"{k}_temp_path {work / 'temp' / k};"
        for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (work / "nginx.conf").write_text(
        f"pid {work}/nginx.pid; worker_processes 2; daemon off; error_log {work}/logs/error.log;\n"
        "events { worker_connections 1024; }\n"
        f"http {{ access_log off; {temp}\n"
        # Alternate the two captures every 2 s (the scrape interval) so counters move.
        '  map $msec $half { "~^\\d*[02468]\\." 0; default 1; }\n'
        f"  server {{ listen 127.0.0.1:{port}; root {work}/www;\n"
        "    location ~ ^/(?<node>n\\d+)/metrics$ {\n"
        "      default_type text/plain; try_files /$node/$half/metrics =404; }\n"
        "  }\n}\n"
    )
    proc = subprocess.Popen(["nginx", "-p", f"{work}/", "-c", str(work / "nginx.conf")])
    time.sleep(0.5)
    return proc, port


async def run(port: int, seconds: float) -> None:
    import django

    django.setup()
    from telemetry.collector import Collector, ScrapeSource, Target
    from telemetry.runner import channel_publish

    targets = [
        Target("bench", f"n{i}", f"http://127.0.0.1:{port}/n{i}/metrics") for i in range(NODES)
    ]
    publish = None if "--no-publish" in sys.argv else channel_publish
    collector = Collector([ScrapeSource(targets)], publish=publish)
    await collector.tick(time.time())  # warm up: baselines, Redis connections
    ticks, points, stale, tick_ms = 0, 0, 0, []
    cpu0, wall0 = time.process_time(), time.monotonic()
    next_at = time.monotonic()
    while time.monotonic() - wall0 < seconds:
        next_at += 2.0
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        started = time.monotonic()
        payloads = await collector.tick(time.time())
        tick_ms.append((time.monotonic() - started) * 1000)
        ticks += 1
        cluster = payloads.get("cluster-bench", [])
        tick_points = sum(p["type"] == "point" for p in cluster)
        tick_stale = sum(p["type"] == "node" and p["stale"] for p in cluster)
        points, stale = points + tick_points, stale + tick_stale
        overran = " MISSED (longer than the 2 s interval)" if tick_ms[-1] > 2000 else ""
        print(
            f"tick {ticks}: {tick_ms[-1]:.0f} ms, {tick_points} points, "
            f"{tick_stale} stale{overran}",
            flush=True,
        )
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    overruns = sum(ms > 2000 for ms in tick_ms)
    tick_ms.sort()
    print(
        f"nodes {NODES} x models {MODELS} x 2 versions, interval 2 s, {ticks} ticks in {wall:.1f} s"
        f", {overruns} longer than the interval (missed)"
    )
    print(f"points per tick {points / ticks:.0f} (stale node answers: {stale})")
    print(f"tick wall time p50 {tick_ms[len(tick_ms) // 2]:.0f} ms, max {tick_ms[-1]:.0f} ms")
    print(f"collector CPU: {cpu:.2f} s over {wall:.1f} s = {cpu / wall:.3f} cores (goal < 0.5)")


def main() -> None:
    if not shutil.which("nginx"):
        sys.exit("nginx is not installed (apt-get install nginx)")
    numbers = [a for a in sys.argv[1:] if not a.startswith("--")]
    seconds = float(numbers[0]) if numbers else 30.0
    with tempfile.TemporaryDirectory(prefix="collector-bench-") as tmp:
        proc, port = start_nginx(Path(tmp))
        try:
            asyncio.run(run(port, seconds))
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
