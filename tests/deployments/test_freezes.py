"""Freeze windows and emergency overrides through the API against PostgreSQL: a frozen cluster
refuses a release start, a plan can still be planned, an override needs a second release
manager, windows are checked and audited."""

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from deployments.freezes import (
    cluster_freeze_view,
    cluster_freezes,
    cluster_frozen,
    freeze_overrides_open,
)
from deployments.models import FreezeWindow
from tests.clients import api_as
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    found = release_world(make_user)
    found["remy"] = make_user("remy", role="release-managers")
    return found


def _freeze_now(user, **extra):
    now = timezone.now()
    body = {"cluster": "prod", "reason": "year-end change freeze",
            "starts_at": (now - timedelta(hours=1)).isoformat(),
            "ends_at": (now + timedelta(hours=2)).isoformat(), **extra}  # fmt: skip
    return api_as(user).post("/api/v1/freezes/", body, format="json")


def _page_agrees(name: str = "prod") -> str:
    """The cluster page's one read of its freezes (`cluster_freeze_view`) says what the
    checks say each on their own; the frozen text."""
    now = timezone.now()
    view = cluster_freeze_view(name, now)
    assert view["frozen"] == cluster_frozen(name, now)
    assert view["freezes"] == cluster_freezes(name, now)
    assert view["overrides"] == freeze_overrides_open(name, now)
    return view["frozen"]


def test_a_frozen_cluster_refuses_a_release_until_a_second_person_approves_an_override(world):
    rita, remy = world["rita"], world["remy"]
    assert _page_agrees() == ""
    created = _freeze_now(rita)
    assert _page_agrees().startswith("prod is frozen until ")
    assert created.status_code == 201, created.content
    state = api_as(world["ada"]).get("/api/v1/clusters/prod/freeze/").json()
    assert (
        state["frozen"].startswith("prod is frozen until ")
        and "year-end change freeze" in state["frozen"]
    )
    assert state["upcoming"][0]["now"] is True and state["override"] is None
    start = {"cluster": "prod", "model": "risk_score", "candidate_version": 2}
    refused = api_as(rita).post("/api/v1/releases/", start, format="json")
    assert (
        refused.status_code == 409
        and "nothing starts on a frozen cluster" in refused.content.decode()
    )
    # A plan is planned during the freeze; its wave waits for the freeze when it comes to start.
    plan = {"model": "risk_score", "candidate_version": 2, "waves": [{"clusters": ["prod"]}]}
    assert api_as(rita).post("/api/v1/release-plans/", plan, format="json").status_code == 201
    asked = api_as(rita).post("/api/v1/clusters/prod/freeze-overrides/",
                           {"reason": "hotfix for INC-77", "hours": 2}, format="json")  # fmt: skip
    assert asked.status_code == 201 and asked.json()["approved_at"] is None
    assert cluster_frozen("prod")  # asked is not in force
    assert _page_agrees()
    url = f"/api/v1/freeze-overrides/{asked.json()['id']}/approve/"
    assert api_as(rita).post(url).status_code == 403  # not who asked for it
    approved = api_as(remy).post(url)
    assert approved.status_code == 200 and approved.json()["approved_by"] == "remy"
    assert cluster_frozen("prod") == ""
    assert _page_agrees() == ""
    assert api_as(remy).post(url).status_code == 409  # once
    started = api_as(rita).post("/api/v1/releases/", start, format="json")
    assert started.status_code == 201, started.content
    actions = set(
        AuditEvent.objects.filter(action__startswith="freeze.").values_list("action", flat=True)
    )
    assert actions == {"freeze.created", "freeze.override_requested", "freeze.override_approved"}


def test_weekly_and_fleet_wide_windows_and_what_is_refused(world):
    rita = world["rita"]
    now = timezone.now()
    local = now.astimezone(ZoneInfo("Europe/Berlin"))  # two hours around now, every day
    weekly = {"reason": "nights", "timezone": "Europe/Berlin", "weekdays": [0, 1, 2, 3, 4, 5, 6],
              "start": f"{local - timedelta(hours=1):%H:%M}",
              "end": f"{local + timedelta(hours=1):%H:%M}"}  # fmt: skip
    made = api_as(rita).post("/api/v1/freezes/", weekly, format="json")
    assert made.status_code == 201 and made.json()["cluster"] is None  # every cluster
    assert "nights" in cluster_frozen("prod") and "nights" in _page_agrees()
    listed = api_as(world["ada"]).get("/api/v1/freezes/?cluster=prod").json()
    assert [w["reason"] for w in listed] == ["nights"]
    bad = [
        ({**weekly, "timezone": "Mars/Olympus"}, "timezone"),
        ({**weekly, "end": weekly["start"]}, "end"),
        ({"reason": "x", "weekdays": [1]}, "weekdays"),
        (
            {
                "reason": "both",
                "weekdays": [1],
                "start": "01:00",
                "end": "02:00",
                "starts_at": now.isoformat(),
                "ends_at": now.isoformat(),
            },
            "starts_at",
        ),  # fmt: skip
        (
            {
                "reason": "backwards",
                "starts_at": now.isoformat(),
                "ends_at": (now - timedelta(hours=1)).isoformat(),
            },
            "ends_at",
        ),  # fmt: skip
        ({"reason": "", "starts_at": now.isoformat(), "ends_at": now.isoformat()}, "reason"),
        ({**weekly, "cluster": "nowhere"}, "cluster"),
    ]
    for body, field in bad:
        answer = api_as(rita).post("/api/v1/freezes/", body, format="json")
        assert answer.status_code in (400, 404), (body, answer.content)
        assert any(e.get("field") == field for e in answer.json()["errors"]), (body, answer.json())
    assert api_as(world["ada"]).post("/api/v1/freezes/", weekly, format="json").status_code == 403
    gone = api_as(rita).delete(f"/api/v1/freezes/{made.json()['id']}/")
    assert gone.status_code == 204 and not FreezeWindow.objects.exists()
    assert cluster_frozen("prod") == ""
    assert AuditEvent.objects.filter(action="freeze.deleted").count() == 1


def test_the_cluster_and_plan_pages_show_the_freeze_now_and_the_ones_coming(world, client):
    rita = world["rita"]
    assert _freeze_now(rita).status_code == 201
    later = timezone.now() + timedelta(days=3)
    coming = {"reason": "datacenter move", "starts_at": later.isoformat(),
              "ends_at": (later + timedelta(hours=6)).isoformat()}  # fmt: skip
    assert api_as(rita).post("/api/v1/freezes/", coming, format="json").status_code == 201
    client.force_login(world["ada"])
    page = client.get("/clusters/prod/").content.decode()
    assert 'data-testid="frozen-now"' in page and "prod is frozen until" in page
    assert "year-end change freeze" in page and "datacenter move" in page
    assert "(every cluster)" in page  # the datacenter move is fleet-wide
    plan = {"model": "risk_score", "candidate_version": 2, "waves": [{"clusters": ["prod"]}]}
    plan_id = api_as(rita).post("/api/v1/release-plans/", plan, format="json").json()["id"]
    page = client.get(f"/plans/{plan_id}/").content.decode()
    card = page.split('data-testid="plan-freezes"', 1)[1]
    assert 'data-cluster="prod"' in card and "prod is frozen until" in card
