"""GET /api/v1/metrics/: time series from rollups, filtered, for any signed-in user."""

from datetime import datetime, timedelta

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


def test_metrics_answer_names_its_resolution_and_a_long_range_comes_as_sums(make_user):
    cluster = TritonCluster.objects.create(name="week", environment="production")
    now = timezone.now().replace(second=0, microsecond=0)
    # Three days of one version, every minute: 60 requests a minute, 2 of them failing.
    Rollup.objects.bulk_create(
        Rollup(
            cluster=cluster,
            node_name="n1",
            model_name="risk",
            version="1",
            minute=now - timedelta(minutes=m),
            requests=60,
            successes=58,
            failures=2,
            request_us=58 * 4000,
            p99_ms=float(m % 5),
        )
        for m in range(1, 3 * 24 * 60 + 1)
    )
    client = _client(make_user)
    day = client.get("/api/v1/metrics/", {"cluster": "week", "since": "24h"}).json()
    assert (day["step_s"], day["resolution"]) == (60, "1m")
    # The window is measured from the server's clock at the request, which may be a minute
    # past `now` (thousands of rows were written meanwhile): counted from the answer's since.
    since = datetime.fromisoformat(day["since"])
    inside = sum(1 for m in range(1, 3 * 24 * 60 + 1) if now - timedelta(minutes=m) >= since)
    assert len(day["points"]) in (inside, inside + 1)  # the oldest minute starts before since
    # A chart 600 px wide asks for at most 600 points a series: the day comes as 5-minute
    # sums, three days hourly; fewer than 10 points is refused.
    narrow = {"cluster": "week", "since": "24h", "max_points": 600}
    assert client.get("/api/v1/metrics/", narrow).json()["resolution"] == "5m"
    narrow.update(since="72h", shape="series", fields="requests,p99_ms")
    hourly = client.get("/api/v1/metrics/", narrow).json()
    assert hourly["step_s"] == 3600 and len(hourly["series"][0]["t"]) in (72, 73)
    assert hourly["series"][0]["requests"][1:-1] == [3600] * (len(hourly["series"][0]["t"]) - 2)
    assert max(hourly["series"][0]["p99_ms"]) == 4.0
    assert client.get("/api/v1/metrics/", {**narrow, "max_points": 5}).status_code == 400
    three = client.get("/api/v1/metrics/", {"cluster": "week", "since": "72h"}).json()
    assert (three["step_s"], three["resolution"]) == (300, "5m")
    points = three["points"]
    assert len(points) <= 72 * 12 + 1
    whole = points[1:-1]  # the edges may hold fewer minutes
    assert all(p["requests"] == 300 and p["failures"] == 10 for p in whole)
    assert all(p["request_rate"] == 1.0 and p["avg_ms"] == 4.0 for p in points)
    assert all(p["p99_ms"] == 4.0 for p in whole)  # the bucket's worst minute


def test_metrics_series_shape_gives_one_array_per_field(rollups, make_user):
    client = _client(make_user)
    answer = client.get(
        "/api/v1/metrics/", {"cluster": "prod", "model": "risk", "shape": "series"}
    ).json()
    assert "points" not in answer and answer["step_s"] == 60
    by_version = {s["version"]: s for s in answer["series"]}
    assert set(by_version) == {"1", "2"}
    two = by_version["2"]
    assert (two["cluster"], two["model"]) == ("prod", "risk")
    assert len(two["t"]) == len(two["request_rate"]) == len(two["p99_ms"]) == 2
    assert (
        two["t"] == sorted(two["t"])
        and two["t"][-1] == (rollups - timedelta(minutes=1)).timestamp()
    )
    assert two["request_rate"] == [2.0, 2.0] and two["p99_ms"] == [12.0, 12.0]
    nodes = client.get(
        "/api/v1/metrics/", {"cluster": "prod", "kind": "node", "shape": "series"}
    ).json()["series"]
    assert {(s["node"], tuple(s["cpu_util"])) for s in nodes} == {
        ("n1", (0.5, 0.5)),
        ("n2", (0.5, 0.5)),
    }


def test_metrics_fields_keep_only_what_a_chart_draws(rollups, make_user):
    client = _client(make_user)
    asked = {"cluster": "prod", "model": "risk", "version": "2", "fields": "p99_ms,request_rate"}
    one = client.get("/api/v1/metrics/", {**asked, "shape": "series"}).json()["series"]
    assert len(one) == 1
    assert set(one[0]) == {"cluster", "model", "version", "t", "p99_ms", "request_rate"}
    assert all(isinstance(t, int) for t in one[0]["t"])  # whole epoch seconds
    assert one[0]["p99_ms"] == [12.0, 12.0] and one[0]["request_rate"] == [2.0, 2.0]
    points = client.get("/api/v1/metrics/", asked).json()["points"]
    assert [set(p) for p in points] == [
        {"ts", "cluster", "model", "version", "p99_ms", "request_rate"}
    ] * 2
    nodes = client.get(
        "/api/v1/metrics/",
        {"cluster": "prod", "kind": "node", "shape": "series", "fields": "cpu_util"},
    ).json()["series"]
    assert {(s["node"], tuple(s["cpu_util"]), "gpu_util" in s) for s in nodes} == {
        ("n1", (0.5, 0.5), False),
        ("n2", (0.5, 0.5), False),
    }
    wrong = client.get("/api/v1/metrics/", {"fields": "p99_ms,cpu_util"})
    assert wrong.status_code == 400
    assert "Unknown model field(s) cpu_util; choose from requests," in str(wrong.json())
