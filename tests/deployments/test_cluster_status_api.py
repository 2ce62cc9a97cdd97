"""GET /api/v1/clusters/{name}/status/ against real Triton nodes: answered from a reading at
most SWITCHYARD_CLUSTER_STATUS_REFRESH_S old, and however many clients ask at once, the nodes
are asked once (deployments/node_status.py `cluster_status_read`)."""

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from deployments.services import cluster_create, node_create
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _read(user, name: str) -> dict:
    api = APIClient()
    api.force_authenticate(user)
    try:
        answer = api.get(f"/api/v1/clusters/{name}/status/")
        assert answer.status_code == 200, answer.content
        return answer.json()
    finally:
        connection.close()  # each reader thread's own connection


def test_many_readers_at_once_share_one_reading_and_a_new_node_is_read_at_once(
    triton_cluster, make_user
):
    viewer = make_user("viewer")  # any signed-in user reads
    first, second = triton_cluster.nodes
    cluster = cluster_create(actor=None, name="status-api", environment="staging")
    node_create(cluster=cluster, actor=None, name="a", http_url=first.http_url)
    with override_settings(SWITCHYARD_CLUSTER_STATUS_REFRESH_S=60.0):
        with ThreadPoolExecutor(max_workers=12) as pool:
            answers = list(pool.map(lambda _: _read(viewer, "status-api"), range(12)))
        # One reading for all twelve: the nodes were asked once.
        assert len({a["checked_at"] for a in answers}) == 1
        assert all([n["health"] for n in a["nodes"]] == ["up"] for a in answers)
        assert answers[0]["is_stale"] is False
        again = _read(viewer, "status-api")
        assert again["checked_at"] == answers[0]["checked_at"]  # within its 60 s: stored
        # A node the reading does not cover is read at once, not shown as unknown.
        node_create(cluster=cluster, actor=None, name="b", http_url=second.http_url)
        grown = _read(viewer, "status-api")
    assert [(n["name"], n["health"]) for n in grown["nodes"]] == [("a", "up"), ("b", "up")]
    assert grown["checked_at"] > answers[0]["checked_at"]
    # A reading older than the interval is taken again by the next reader.
    taken = datetime.fromisoformat(grown["checked_at"].replace("Z", "+00:00"))
    with override_settings(SWITCHYARD_CLUSTER_STATUS_REFRESH_S=0.2):
        newer = wait_for(
            lambda: (
                (a := _read(viewer, "status-api"))
                and datetime.fromisoformat(a["checked_at"].replace("Z", "+00:00")) > taken
                and a
            ),
            timeout_s=30,
            what="a reading newer than the last",
        )
    assert [n["health"] for n in newer["nodes"]] == ["up", "up"]
