"""Prices over time: a change applies from the moment it is made; closed periods keep the
price they were charged at, however often their rollups are rebuilt."""

import dataclasses
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.models import PriceChange, TritonCluster, TritonNode
from deployments.prices import price_change
from deployments.services import cluster_create, node_create
from reports import selectors
from reports.services import DAY, cost_rollup_build, cost_rollup_catch_up, floor_day
from telemetry.services import rollups_write
from tests.reports.conftest import PRICE, write_scraped

pytestmark = pytest.mark.django_db

NEW_PRICE = Decimal("7200.0000")  # twice PRICE: 120 a minute
MINUTE = timedelta(minutes=1)


def _floor_minute(at):
    return at.replace(second=0, microsecond=0)


def _report(since, until, group_by="node"):
    return selectors.cost_report(since=since, until=until, group_by=group_by)


def _parts(report) -> Decimal:
    rows = report["rows"]
    return sum(r["cost"] + r["idle_cost"] + r["unknown_cost"] for r in rows)


@pytest.mark.triton
def test_a_price_change_mid_day_leaves_closed_periods_at_the_price_they_were_charged(
    scraped, make_user
):
    start, _names = write_scraped(scraped)
    # The same real collector minutes a day earlier: the day before the change.
    _, rows, _, _ = scraped
    assert rollups_write(rows=[dataclasses.replace(r, minute=r.minute - 86400) for r in rows])
    day_before = floor_day(start - DAY)
    cost_rollup_build(since=day_before)
    closed_until = _floor_minute(timezone.now())
    before = {
        "day": _report(day_before, day_before + DAY),
        "until_now": _report(day_before, closed_until),
        "by_model": _report(day_before, closed_until, group_by="model"),
    }

    client = APIClient()
    client.force_authenticate(make_user("rita", role="release-managers"))
    answer = client.patch(
        "/api/v1/clusters/cost-lab/", {"node_hourly_cost": str(NEW_PRICE)}, format="json"
    )
    assert answer.status_code == 200, answer.content
    changed_at = PriceChange.objects.get(node_name="", before__node_hourly_cost=str(PRICE))
    first_new = _floor_minute(changed_at.effective_at)  # the minute it was made in
    time.sleep(max(0.0, (first_new + MINUTE - timezone.now()).total_seconds()) + 0.5)

    cost_rollup_build(since=day_before)  # the day's rollups, rebuilt
    cost_rollup_catch_up()  # and the periodic run's own rebuild of the last hours
    assert _report(day_before, day_before + DAY) == before["day"]
    assert _report(day_before, closed_until) == before["until_now"]
    assert _report(day_before, closed_until, group_by="model") == before["by_model"]

    after = _report(first_new, first_new + MINUTE)
    assert after["total_cost"] == (NEW_PRICE / 60).quantize(Decimal("0.01"))
    whole = _report(day_before, first_new + MINUTE)
    old_minutes = (first_new - (start - DAY)) // MINUTE
    expected = PRICE / 60 * old_minutes + NEW_PRICE / 60
    assert whole["total_cost"] == expected.quantize(Decimal("0.01"))
    assert _parts(whole) == whole["total_cost"]  # allocated + idle + unknown, to the cent
    by_model = _report(day_before, first_new + MINUTE, group_by="model")
    parts = sum(r["cost"] for r in by_model["rows"])
    assert parts + by_model["idle_cost"] + by_model["unknown_cost"] == whole["total_cost"]

    history = client.get("/api/v1/clusters/cost-lab/prices/").json()
    assert [h["node_hourly_cost"] for h in history] == [str(NEW_PRICE), str(PRICE)]
    assert history[0]["before"] == {"node_hourly_cost": str(PRICE)}
    assert history[0]["changed_by"] == "rita" and history[1]["before"] == {}
    event = AuditEvent.objects.get(action="cluster.price_changed")
    assert event.actor_username == "rita"
    assert event.details["after"] == {"node_hourly_cost": str(NEW_PRICE)}


def test_a_node_price_is_changed_through_the_api_recorded_and_audited(make_user):
    client = APIClient()
    client.force_authenticate(make_user("rita", role="release-managers"))
    assert (
        client.post(
            "/api/v1/clusters/", {"name": "px", "environment": "staging"}, format="json"
        ).status_code
        == 201
    )
    body = {"name": "g1", "http_url": "http://127.0.0.1:9", "hourly_cost": "2.0000"}
    assert client.post("/api/v1/clusters/px/nodes/", body, format="json").status_code == 201
    url = "/api/v1/clusters/px/nodes/g1/"
    answer = client.patch(url, {"gpu_hourly_cost": "1.5000", "gpu_count": 2}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["gpu_count"] == 2 and answer.json()["gpu_hourly_cost"] == "1.5000"
    history = client.get("/api/v1/clusters/px/prices/", {"node": "g1"}).json()
    assert [h["gpu_count"] for h in history] == [2, None]
    assert history[0]["before"]["gpu_count"] is None and history[0]["hourly_cost"] == "2.0000"
    everything = client.get("/api/v1/clusters/px/prices/").json()
    assert {h["node"] for h in everything} == {"", "g1"}  # the cluster's first price too
    event = AuditEvent.objects.get(action="node.price_changed")
    assert event.details["before"]["gpu_hourly_cost"] is None
    assert event.details["after"]["gpu_hourly_cost"] == "1.5000"
    same = client.patch(url, {"gpu_count": 2}, format="json")
    assert same.status_code == 200 and PriceChange.objects.filter(node_name="g1").count() == 2


def test_the_cluster_page_shows_the_price_history(client, make_user):
    rita = make_user("rita", role="release-managers")
    cluster = cluster_create(actor=rita, name="px", environment="staging", node_hourly_cost="1")
    node = node_create(cluster=cluster, actor=rita, name="g1", http_url="http://127.0.0.1:9")
    price_change(obj=node, actor=rita, hourly_cost=Decimal("2.5"), execution_slots=4)
    client.force_login(make_user("ada", role="algorithm"))
    try:
        page = client.get("/clusters/px/").content.decode()
    finally:
        key = f"deployments:cluster-status:{cluster.pk}"
        cache.delete_many([key, f"{key}:queued"])
    table = page.split('data-testid="price-history"')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]  # newest first, after the heading
    assert "g1" in rows[0] and "an hour: none → 2.5000" in rows[0] and "rita" in rows[0]
    assert "execution slots: none → 4" in rows[0]
    assert "g1" in rows[1] and "the cluster price" in rows[1] and "first price" in rows[1]
    assert "cluster" in rows[2] and "an hour: 1" in rows[2]


@pytest.mark.parametrize(
    "body, field",
    [({"hourly_cost": "-1"}, "hourly_cost"), ({"http_url": "http://x:1"}, "http_url")],
)
def test_a_bad_node_price_is_refused_naming_the_field(make_user, body, field):
    cluster = TritonCluster.objects.create(name="px", environment="staging")
    TritonNode.objects.create(cluster=cluster, name="g1", http_url="http://127.0.0.1:9")
    client = APIClient()
    client.force_authenticate(make_user("rita", role="release-managers"))
    answer = client.patch("/api/v1/clusters/px/nodes/g1/", body, format="json")
    assert answer.status_code == 400 and answer.json()["errors"][0]["field"] == field
    assert not PriceChange.objects.filter(node_name="g1").exists()


def test_a_node_priced_before_the_history_keeps_that_price_for_its_past_minutes(make_user):
    cluster = TritonCluster.objects.create(name="px", environment="staging")
    node = TritonNode.objects.create(
        cluster=cluster, name="g1", http_url="http://127.0.0.1:9", hourly_cost=Decimal("3")
    )
    client = APIClient()
    client.force_authenticate(make_user("rita", role="managers"))
    answer = client.patch("/api/v1/clusters/px/nodes/g1/", {"hourly_cost": "9"}, format="json")
    assert answer.status_code == 403  # release managers change prices
    client.force_authenticate(make_user("rhea", role="release-managers"))
    assert (
        client.patch(
            "/api/v1/clusters/px/nodes/g1/", {"hourly_cost": "9"}, format="json"
        ).status_code
        == 200
    )
    first, change = PriceChange.objects.filter(node_name=node.name).order_by("effective_at")
    assert first.hourly_cost == Decimal("3") and first.effective_at.year == 1970
    assert change.hourly_cost == Decimal("9") and change.changed_by_username == "rhea"
