"""Alerts: the lifecycle services, their audit rows (the webhooks' outbox), the API and roles."""

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.services import cluster_create
from health.models import Alert
from health.services import Finding, alert_fire, alerts_sync

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(make_user):
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    cluster = cluster_create(actor=rita, name="prod", environment="production")
    return {"rita": rita, "ada": ada, "cluster": cluster}


def _finding(cluster, version=3, **kw) -> Finding:
    return Finding(
        kind=kw.get("kind", "silent_failure"),
        severity="critical",
        summary=kw.get("summary", "risk_score v3: 100% of 40 requests failed"),
        cluster=cluster,
        model="risk_score",
        version=version,
    )


def _api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_a_finding_seen_again_refreshes_its_open_alert_instead_of_adding_one(world):
    first, created = alert_fire(finding=_finding(world["cluster"]))
    again, created_again = alert_fire(finding=_finding(world["cluster"], summary="now 41"))
    assert created and not created_again and again.pk == first.pk
    assert Alert.objects.get(pk=first.pk).summary == "now 41"
    assert AuditEvent.objects.filter(action="alert.fired").count() == 1


def test_fired_and_resolved_leave_audit_rows_carrying_the_alert(world):
    alert, _ = alert_fire(finding=_finding(world["cluster"]))
    alerts_sync(kind="silent_failure", firing=[], cluster=world["cluster"])
    alert.refresh_from_db()
    assert alert.state == "resolved" and alert.resolved_at is not None
    for action in ("alert.fired", "alert.resolved"):
        row = AuditEvent.objects.get(action=action)
        assert row.object_type == "health.alert" and row.object_id == str(alert.pk)
        assert row.details["alert_id"] == alert.pk
        assert {k: row.details[k] for k in ("kind", "severity", "cluster", "model", "version")} == {
            "kind": "silent_failure",
            "severity": "critical",
            "cluster": "prod",
            "model": "risk_score",
            "version": 3,
        }
        assert row.details["summary"] and "node" in row.details
    # A finding that fires again after it resolved opens a new alert.
    again, created = alert_fire(finding=_finding(world["cluster"]))
    assert created and again.pk != alert.pk


def test_sync_leaves_alerts_without_a_verdict_open(world):
    alert, _ = alert_fire(finding=_finding(world["cluster"]))
    key = _finding(world["cluster"]).key
    alerts_sync(kind="silent_failure", firing=[], unknown={key}, cluster=world["cluster"])
    alert.refresh_from_db()
    assert alert.state == "firing"


def test_everyone_signed_in_reads_alerts_filtered_by_state(world, make_user):
    open_alert, _ = alert_fire(finding=_finding(world["cluster"], version=3))
    done, _ = alert_fire(finding=_finding(world["cluster"], version=4))
    alerts_sync(kind="silent_failure", firing=[_finding(world["cluster"], version=3)])
    manager = make_user("max", role="managers")
    for user in (world["ada"], world["rita"], manager):
        rows = _api(user).get("/api/v1/alerts/?state=firing").json()
        assert [r["id"] for r in rows] == [open_alert.pk]
    response = _api(world["ada"]).get("/api/v1/alerts/?state=resolved")
    assert [r["id"] for r in response.json()] == [done.pk]
    assert response["X-Total-Count"] == "1"
    row = response.json()[0]
    assert set(row) >= {
        "id",
        "kind",
        "severity",
        "cluster",
        "node",
        "model",
        "version",
        "summary",
        "started_at",
        "resolved_at",
        "acknowledged_by",
    }
    assert len(_api(world["ada"]).get("/api/v1/alerts/?state=all").json()) == 2
    assert APIClient().get("/api/v1/alerts/").status_code in (401, 403)


def test_a_bad_filter_is_refused_naming_the_field(world):
    response = _api(world["ada"]).get("/api/v1/alerts/?state=burning")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "state"


def test_release_managers_acknowledge_and_the_row_says_who(world):
    alert, _ = alert_fire(finding=_finding(world["cluster"]))
    url = f"/api/v1/alerts/{alert.pk}/ack/"
    assert _api(world["ada"]).post(url).status_code == 403
    response = _api(world["rita"]).post(url)
    assert response.status_code == 200
    assert response.json()["acknowledged_by"] == "rita"
    assert response.json()["state"] == "acknowledged"
    ack = AuditEvent.objects.get(action="alert.acknowledged")
    assert ack.actor_username == "rita" and ack.details["alert_id"] == alert.pk
    # Still open: `firing` lists it, the badge (unacknowledged ones) no longer counts it.
    from health.selectors import alerts_unacknowledged_count

    assert [r["id"] for r in _api(world["ada"]).get("/api/v1/alerts/?state=firing").json()] == [
        alert.pk
    ]
    assert alerts_unacknowledged_count() == 0
    alerts_sync(kind="silent_failure", firing=[])
    assert _api(world["rita"]).post(url).status_code == 409
    assert _api(world["rita"]).post("/api/v1/alerts/999999/ack/").status_code == 404


def test_open_alerts_are_counted_on_the_metrics_endpoint(world, client):
    alert_fire(finding=_finding(world["cluster"]))
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    line = 'switchyard_alerts_open{kind="silent_failure",severity="critical",state="firing"} 1.0'
    assert line in text
