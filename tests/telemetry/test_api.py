"""GET /api/v1/metrics/: time series from rollups, filtered, for any signed-in user."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from deployments.models import TritonCluster
from telemetry.models import Rollup

pytestmark = pytest.mark.django_db


@pytest.fixture
def rollups():
    now = timezone.now().replace(second=0, microsecond=0)
    prod = TritonCluster.objects.create(name="prod", environment="production")
    stage = TritonCluster.objects.create(name="stage", environment="staging")
    rows = []
    for cluster in (prod, stage):
        for node in ("n1", "n2"):
            for minutes_ago in (2, 1, 180):
                minute = now - timedelta(minutes=minutes_ago)
                rows.append(
                    Rollup(cluster=cluster, node_name=node, minute=minute, cpu_util_avg=0.5)
                )
                for model, version in (("risk", "1"), ("risk", "2"), ("router", "1")):
                    rows.append(
                        Rollup(
                            cluster=cluster,
                            node_name=node,
                            model_name=model,
                            version=version,
                            minute=minute,
                            requests=60,
                            successes=57,
                            failures=3,
                            request_us=57 * 4000,
                            queue_us=57 * 500,
                            compute_us=57 * 3000,
                            p99_ms=9.0 if node == "n1" else 12.0,
                        )
                    )
    Rollup.objects.bulk_create(rows)
    return now


def _client(make_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(make_user("viewer"))  # no role: reading is for everyone
    return client


def test_metrics_filter_by_cluster_model_version_and_sum_over_nodes(rollups, make_user):
    answer = _client(make_user).get(
        "/api/v1/metrics/", {"cluster": "prod", "model": "risk", "version": "2"}
    )
    assert answer.status_code == 200
    points = answer.json()["points"]
    assert [p["ts"] for p in points] == sorted(p["ts"] for p in points) and len(points) == 2
    first = points[0]
    assert (first["cluster"], first["model"], first["version"]) == ("prod", "risk", "2")
    assert first["requests"] == 120 and first["failures"] == 6  # two nodes summed
    assert first["request_rate"] == 2.0 and first["success_rate"] == 95.0
    assert first["avg_ms"] == 4.0 and first["queue_ms"] == 0.5 and first["compute_ms"] == 3.0
    assert first["p99_ms"] == 12.0  # the worst node's, never an average


def test_metrics_since_widens_the_range_and_node_narrows_it(rollups, make_user):
    client = _client(make_user)
    day = client.get("/api/v1/metrics/", {"model": "router", "since": "24h"}).json()["points"]
    assert len(day) == 6 and {p["cluster"] for p in day} == {"prod", "stage"}
    one = client.get("/api/v1/metrics/", {"cluster": "stage", "model": "router", "node": "n1"})
    assert [p["requests"] for p in one.json()["points"]] == [60, 60]
    iso = (rollups - timedelta(minutes=1)).isoformat()
    latest = client.get("/api/v1/metrics/", {"cluster": "prod", "model": "risk", "since": iso})
    assert {p["version"] for p in latest.json()["points"]} == {"1", "2"}
    assert len(latest.json()["points"]) == 2


def test_node_series_and_bad_parameters(rollups, make_user):
    client = _client(make_user)
    nodes = client.get("/api/v1/metrics/", {"cluster": "prod", "kind": "node"}).json()["points"]
    assert {(p["node"], p["cpu_util"]) for p in nodes} == {("n1", 0.5), ("n2", 0.5)}
    assert client.get("/api/v1/metrics/", {"since": "yesterday"}).status_code == 400
    assert client.get("/api/v1/metrics/", {"kind": "node"}).status_code == 400


def test_metrics_need_a_signed_in_user(rollups):
    assert APIClient().get("/api/v1/metrics/").status_code in (401, 403)
