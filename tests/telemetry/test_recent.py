"""The collector's buffer of recent live points in (real) Redis, and the history a live page
opens with: rollups up to where the buffer starts, then the buffer."""

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from deployments.models import TritonCluster
from telemetry import events, recent, selectors
from telemetry.models import Rollup

pytestmark = [pytest.mark.django_db]


def _point(cluster: str, ts: float, node: str = "") -> dict:
    return {
        "type": "point",
        "ts": ts,
        "cluster": cluster,
        "node": node,
        "model": "m",
        "version": "1",
        "request_rate": 5.0,
    }


def test_buffer_keeps_the_drawn_points_of_its_span_only(settings):
    settings.TELEMETRY_RECENT_S = 60
    name = f"rec-{uuid.uuid4().hex[:6]}"
    group, now = events.cluster_group(name), time.time()
    node = {"type": "node", "ts": now - 1, "node": "n1", "stale": True, "error": "refused"}
    payloads = {
        group: [_point(name, now - 90), _point(name, now - 30), _point(name, now - 30, "n1"), node]
    }
    recent.recent_record(payloads=payloads, now=now)
    kept = recent.recent_points(group=group, since=now - 600)
    assert [(p["type"], p["ts"]) for p in kept] == [("point", now - 30), ("node", now - 1)]


def test_history_is_rollups_then_the_buffer_without_overlap(settings):
    name = f"hist-{uuid.uuid4().hex[:6]}"
    cluster = TritonCluster.objects.create(name=name, environment="staging")
    now = time.time()
    minute = datetime.fromtimestamp(now, tz=UTC).replace(second=0, microsecond=0)
    Rollup.objects.bulk_create(
        Rollup(
            cluster=cluster,
            node_name="n1",
            model_name="m",
            version="1",
            minute=minute - timedelta(minutes=m),
            requests=60,
            successes=60,
        )
        for m in range(1, 20)
    )
    start = now - 100
    recent.recent_record(payloads={events.cluster_group(name): [_point(name, start)]}, now=now)
    history = selectors.live_history(cluster=name, now=now)
    rolled = [p for p in history["points"] if "minute" in p]
    assert rolled and all(p["minute"] + 60 <= start for p in rolled)
    assert rolled[0]["ts"] <= now - 15 * 60 + 60  # the whole window, from its first minute
    assert history["points"][-1]["ts"] == start and history["buffer_from"] == start
    reasons = selectors.live_empty_reasons(history=history, now=now, what="x")
    assert reasons["traffic"] == ""
