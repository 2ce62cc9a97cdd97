"""The signed approval link a `plan.waiting_approval` webhook message carries, against
PostgreSQL: where it comes from, what its page lets whom do, and what it refuses (altered,
for another plan, for a wave that no longer waits)."""

from urllib.parse import parse_qs, urlsplit

import pytest

from audit.models import AuditEvent
from notifications.catalog import note_from_audit
from plans.approval_links import approval_token
from plans.models import PlanApproval, ReleasePlan
from plans.tick import plan_tick
from tests.clients import api_as
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db

CONSOLE = "https://console.example.test"


@pytest.fixture
def waiting(make_user, settings, tmp_path):
    """Plan of rita's whose first wave (prod) waits for approval; remy may approve it."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_CONSOLE_URL = CONSOLE + "/"
    world = release_world(make_user)
    world["remy"] = make_user("remy", role="release-managers")
    body = {"model": "risk_score", "candidate_version": 2,
            "waves": [{"clusters": ["prod"], "approval": True}]}  # fmt: skip
    answer = api_as(world["rita"]).post("/api/v1/release-plans/", body, format="json")
    world["plan"] = plan_tick(plan_id=answer.json()["id"])
    assert world["plan"].phase == "WAITING_APPROVAL"
    return world


def _link(plan) -> str:
    row = AuditEvent.objects.get(action="plan.waiting_approval", object_id=str(plan.pk))
    return row.details["approve_url"]


def test_the_waiting_approval_message_carries_a_signed_link_to_that_wave(waiting):
    plan = waiting["plan"]
    link = _link(plan)
    assert link.startswith(f"{CONSOLE}/plans/{plan.pk}/approve/?token=")
    row = AuditEvent.objects.filter(action="plan.waiting_approval").values(
        "id", "action", "object_id", "object_repr", "actor", "details", "created_at"
    )[0]
    note = note_from_audit({**row, "source": "audit", "created_at": "2026-12-06T00:00:00Z"})
    assert note.payload()["data"]["approve_url"] == link


def test_no_link_without_the_consoles_address(waiting, settings):
    settings.SWITCHYARD_CONSOLE_URL = ""
    plan = waiting["plan"]
    ReleasePlan.objects.filter(pk=plan.pk).update(phase="PENDING")
    plan_tick(plan_id=plan.pk)
    row = AuditEvent.objects.filter(action="plan.waiting_approval").order_by("-id").first()
    assert row.details["wave"] == 1 and "approve_url" not in row.details


def test_a_second_release_manager_approves_through_the_link(waiting, client):
    plan = waiting["plan"]
    path = _link(plan).removeprefix(CONSOLE)
    signed_out = client.get(path)
    assert signed_out.status_code == 302 and signed_out["Location"].startswith("/login/")
    client.force_login(waiting["remy"])
    page = client.get(path).content.decode()
    assert 'data-testid="approve-link-form"' in page and "releases v2 on <b>prod</b>" in page
    token = parse_qs(urlsplit(path).query)["token"][0]
    answer = client.post(path, {"token": token, "action": "approve", "comment": "CAB-9"})
    assert answer.status_code == 302 and answer["Location"] == f"/plans/{plan.pk}/"
    approval = PlanApproval.objects.get(plan=plan)
    assert (approval.actor_name, approval.decision, approval.comment) == (
        "remy", "approved", "CAB-9")  # fmt: skip


def test_the_author_opens_the_link_but_may_not_decide(waiting, client):
    plan = waiting["plan"]
    path = _link(plan).removeprefix(CONSOLE)
    client.force_login(waiting["rita"])
    page = client.get(path).content.decode()
    assert 'data-testid="approve-link-author"' in page and "approve-link-form" not in page
    token = parse_qs(urlsplit(path).query)["token"][0]
    answer = client.post(path, {"token": token, "action": "approve"}, follow=True)
    assert "author cannot approve or refuse its waves" in answer.content.decode()
    assert PlanApproval.objects.count() == 0


@pytest.mark.parametrize("how", ["altered", "other-plan"])
def test_a_link_that_is_not_this_plans_is_refused(waiting, client, how):
    plan = waiting["plan"]
    client.force_login(waiting["remy"])
    if how == "altered":
        token = approval_token(plan_id=plan.pk, wave=0)[:-2] + "xx"
        words = "not valid"
    else:
        token = approval_token(plan_id=plan.pk + 1, wave=0)
        words = "another plan"
    page = client.get(f"/plans/{plan.pk}/approve/", {"token": token})
    assert page.status_code == 400 and words in page.content.decode()
    post = client.post(f"/plans/{plan.pk}/approve/", {"token": token, "action": "approve"})
    assert post.status_code == 400 and PlanApproval.objects.count() == 0


def test_a_link_to_a_wave_that_no_longer_waits_approves_nothing(waiting, client):
    plan = waiting["plan"]
    ReleasePlan.objects.filter(pk=plan.pk).update(
        waves=[*plan.waves, {"clusters": ["prod2"], "approval": True}], wave_index=1
    )  # the plan moved on and its second wave waits now
    token = approval_token(plan_id=plan.pk, wave=0)
    client.force_login(waiting["remy"])
    page = client.get(f"/plans/{plan.pk}/approve/", {"token": token}).content.decode()
    assert 'data-testid="approve-link-stale"' in page and "approve-link-form" not in page
    answer = client.post(f"/plans/{plan.pk}/approve/", {"token": token, "action": "approve"},
                         follow=True)  # fmt: skip
    assert "Cannot approve wave 1: the plan is at wave 2 now." in answer.content.decode()
    assert PlanApproval.objects.count() == 0


def test_where_self_approval_is_allowed_the_author_gets_the_form(waiting, client, settings):
    settings.SWITCHYARD_PLAN_SELF_APPROVAL = True
    plan = waiting["plan"]
    client.force_login(waiting["rita"])
    assert 'data-testid="plan-decide"' in client.get(f"/plans/{plan.pk}/").content.decode()
    path = _link(plan).removeprefix(CONSOLE)
    assert 'data-testid="approve-link-form"' in client.get(path).content.decode()


def test_a_quiet_tick_writes_nothing_so_the_plans_watchers_hear_nothing(waiting):
    """Beat ticks a waiting plan every second: its row (and so its socket, plans/apps.py)
    changes only when something did."""
    plan = waiting["plan"]
    stamp = ReleasePlan.objects.get(pk=plan.pk).updated_at
    for _ in range(3):
        assert plan_tick(plan_id=plan.pk).phase == "WAITING_APPROVAL"
    assert ReleasePlan.objects.get(pk=plan.pk).updated_at == stamp
