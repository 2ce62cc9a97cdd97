"""A day of history for the live pages and the cockpit (tests/browser/test_live_pages_day.py
and bench/live_pages.py): per-minute rollups written through telemetry.services, 20 series
on each live page, and a release with a day of one-minute analysed intervals.

`release_world` (tests/release_setup.py) gives model risk_score and cluster prod; here:
* the model page of risk_score: versions 1-5 on prod and on edge-1..3 (20 series);
* the cluster page of prod: risk_score and three more models, versions 1-5 (20 series),
  and its nodes n1 and n2 (CPU and GPU);
* the cockpit of a release of risk_score v2 on prod: 1,440 intervals and 600 guard samples.
"""

from __future__ import annotations

import math
import time

from deployments.models import TritonCluster
from releases.guard_log import SAMPLES_KEPT
from releases.models import Release, ReleaseEvent
from releases.services import release_create
from telemetry.rollups import RollupRow
from telemetry.services import rollups_write

MINUTES = 24 * 60
VERSIONS = [str(v) for v in range(1, 6)]
EDGES = ["edge-1", "edge-2", "edge-3"]
OTHER_MODELS = ["fraud_graph", "churn", "ranker"]
NODES = ["n1", "n2"]


def _model_row(cluster: str, model: str, version: str, minute: float, i: int) -> RollupRow:
    wave = 1 + 0.5 * math.sin(i / 90)  # a daily shape, so the lines are not flat
    requests = round(600 * wave) + int(version)
    return RollupRow(
        cluster=cluster,
        node="n1",
        model=model,
        version=version,
        minute=minute,
        requests=requests,
        successes=requests - (i % 3),
        failures=i % 3,
        request_us=requests * 3000 * wave,
        queue_us=requests * 100.0,
        compute_us=requests * 2500.0,
        p99_ms=7.0 * wave,
        samples=30,
    )


def _node_row(node: str, minute: float, i: int) -> RollupRow:
    util = 0.4 + 0.2 * math.sin(i / 60)
    return RollupRow("prod", node, "", "", minute, cpu_util_avg=util, gpu_util_avg=util / 2)


def day_rollups(*, now: float | None = None) -> int:
    """The day's rollups (the last MINUTES whole minutes before `now`); rows written."""
    end = math.floor((now or time.time()) / 60) * 60
    for name in EDGES:
        TritonCluster.objects.get_or_create(name=name, defaults={"environment": "production"})
    series = [(c, "risk_score", v) for c in ["prod", *EDGES] for v in VERSIONS]
    series += [("prod", m, v) for m in OTHER_MODELS for v in VERSIONS]
    written = 0
    for i in range(MINUTES, 0, -60):  # an hour at a time: batches of a modest size
        minutes = [(end - 60 * k, k) for k in range(i, max(i - 60, 0), -1)]
        rows = [_model_row(*s, m, k) for m, k in minutes for s in series]
        rows += [_node_row(n, m, k) for m, k in minutes for n in NODES]
        written += rollups_write(rows=rows)
    return written


def _analysis(at: float, i: int) -> dict:
    wave = 1 + 0.3 * math.sin(i / 90)
    side = {"requests": 3000, "success_rate": 99.9, "p99_ms": 7.0 * wave, "queue_ms": 0.1}
    return {
        "at": at,
        "seconds": 60.0,
        "weight": 10 if i < MINUTES // 2 else 50,
        "result": "fail" if i % 97 == 0 else "pass",
        "checks": [{"name": "p99_vs_baseline", "passed": True, "text": "p99", "threshold": 9.0}],
        "baseline": {**side, "requests": 27000},
        "candidate": {**side, "p99_ms": 7.5 * wave},
    }


def day_release(world: dict, *, now: float | None = None) -> Release:
    """A release of v2 on prod that has run a day: one analysed minute after another."""
    now = now or time.time()
    release = release_create(
        cluster=world["cluster"],
        candidate=world["versions"][1],
        actor=world["rita"],
        steps=[10, 50, 100],
        step_interval_s=60,
        require_benchmark=False,
    )
    start = now - MINUTES * 60
    ReleaseEvent.objects.bulk_create(
        ReleaseEvent(
            release=release,
            kind="analysis",
            phase="PROGRESSING",
            message="pass",
            data=_analysis(start + 60 * (i + 1), i),
        )
        for i in range(MINUTES)
    )
    samples = [
        {
            "at": now - SAMPLES_KEPT + k,
            "requests": 1000 + 10 * k,
            "errors": k // 50,
            "error_pct": 0.1,
            "lower_pct": 0.05,
            "limit_pct": 1.0,
            "tripped": False,
        }
        for k in range(SAMPLES_KEPT)
    ]
    Release.objects.filter(pk=release.pk).update(
        phase="PROGRESSING", candidate_weight=50, guard_samples=samples
    )
    return Release.objects.get(pk=release.pk)
