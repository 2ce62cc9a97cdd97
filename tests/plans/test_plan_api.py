"""Release plans through the API against PostgreSQL: what a plan refuses before anything runs,
who may approve a wave (four-eyes), and which action each phase takes."""

import pytest

from audit.models import AuditEvent
from plans.models import PlanApproval, PlanRelease, ReleasePlan
from releases.models import Release
from tests.clients import api_as
from tests.release_setup import release_world_with_staging

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(make_user, settings, tmp_path):
    """risk_score v1 serving on `prod` and `staging`, v2 registered; rita and remy are release
    managers, ada is in the algorithm team."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    return release_world_with_staging(make_user)


def _plan(**extra) -> dict:
    return {
        "model": "risk_score",
        "candidate_version": 2,
        "waves": [
            {"clusters": ["staging"], "release": {"steps": [50, 100]}, "bake_s": 30},
            {"clusters": ["prod"], "approval": True},
        ],
        **extra,
    }


def test_a_plan_is_recorded_with_a_cell_per_wave_and_cluster_and_starts_nothing_itself(fleet):
    answer = api_as(fleet["rita"]).post("/api/v1/release-plans/", _plan(), format="json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["state"] == "pending" and body["wave_index"] == 0 and body["created_by"] == "rita"
    assert [[c["cluster"] for c in w["clusters"]] for w in body["waves"]] == [["staging"], ["prod"]]
    assert body["waves"][0]["release"]["steps"] == [50, 100] and body["waves"][1]["approval"]
    assert body["waves"][0]["bake_s"] == 30 and body["waves"][0]["clusters"][0]["release"] is None
    assert PlanRelease.objects.filter(plan_id=body["id"]).count() == 2
    assert Release.objects.count() == 0  # the plan's tick starts the first wave's release
    assert AuditEvent.objects.filter(action="plan.started").count() == 1
    listed = api_as(fleet["ada"]).get("/api/v1/release-plans/?model=risk_score&state=pending")
    assert listed.status_code == 200 and [p["id"] for p in listed.json()] == [body["id"]]


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"waves": [{"clusters": ["nowhere"]}]}, "waves[0].clusters", "No cluster named nowhere"),
        ({"waves": [{"clusters": ["prod"]}, {"clusters": ["prod"]}]}, "waves[1].clusters",
         "in wave 1 already"),
        ({"waves": [{"clusters": ["prod"], "release": {"steps": [0]}}]}, "waves", ""),
        ({"waves": [{"clusters": ["prod"], "release": {"colour": "red"}}]}, "waves", ""),
        ({"waves": []}, "waves", ""),
        ({"on_failure": "pray"}, "on_failure", ""),
        ({"candidate_version": 9}, "candidate_version", "No version 9"),
        ({"candidate_version": 1}, "waves[0]", "Wave 1, cluster staging"),
    ],
)  # fmt: skip
def test_a_plan_that_cannot_run_is_refused_before_anything_is_written(fleet, change, field, words):
    answer = api_as(fleet["rita"]).post("/api/v1/release-plans/", _plan(**change), format="json")
    assert answer.status_code in (400, 404, 409), answer.content
    errors = answer.json()["errors"]
    assert any(e.get("field", "").startswith(field) for e in errors), errors
    assert words in answer.content.decode()
    assert ReleasePlan.objects.count() == 0 and Release.objects.count() == 0


def test_only_release_managers_start_plans(fleet):
    answer = api_as(fleet["ada"]).post("/api/v1/release-plans/", _plan(), format="json")
    assert answer.status_code == 403


def _waiting(fleet) -> int:
    plan_id = (
        api_as(fleet["rita"]).post("/api/v1/release-plans/", _plan(), format="json").json()["id"]
    )
    ReleasePlan.objects.filter(pk=plan_id).update(phase="WAITING_APPROVAL", wave_index=1)
    return plan_id


def test_the_author_may_not_approve_a_wave_another_release_manager_may(fleet, settings):
    plan_id = _waiting(fleet)
    url = f"/api/v1/release-plans/{plan_id}/actions/"
    own = api_as(fleet["rita"]).post(url, {"action": "approve"}, format="json")
    assert own.status_code == 403 and "four-eyes" in own.content.decode()
    assert api_as(fleet["ada"]).post(url, {"action": "approve"}, format="json").status_code == 403
    answer = api_as(fleet["remy"]).post(url, {"action": "approve", "comment": "CAB-42 ok"},
                                     format="json")  # fmt: skip
    assert answer.status_code == 200, answer.content
    approval = answer.json()["approvals"][0]
    assert (approval["wave"], approval["decision"], approval["actor"]) == (1, "approved", "remy")
    assert approval["comment"] == "CAB-42 ok"
    row = AuditEvent.objects.get(action="plan.approve")
    assert row.details == {"wave": 2, "comment": "CAB-42 ok"}
    assert any("remy approved wave 2: CAB-42 ok" in e["message"] for e in answer.json()["events"])


def test_a_superuser_author_is_held_to_four_eyes_unless_the_setting_allows(
    fleet, make_user, settings
):
    root = make_user("root", superuser=True)
    plan_id = api_as(root).post("/api/v1/release-plans/", _plan(), format="json").json()["id"]
    ReleasePlan.objects.filter(pk=plan_id).update(phase="WAITING_APPROVAL", wave_index=1)
    url = f"/api/v1/release-plans/{plan_id}/actions/"
    assert api_as(root).post(url, {"action": "refuse"}, format="json").status_code == 403
    settings.SWITCHYARD_PLAN_SELF_APPROVAL = True
    assert api_as(root).post(url, {"action": "refuse", "comment": "not today"},
                          format="json").status_code == 200  # fmt: skip
    assert PlanApproval.objects.get(plan_id=plan_id).decision == "refused"


def test_each_action_only_where_the_phase_takes_it(fleet):
    plan_id = (
        api_as(fleet["rita"]).post("/api/v1/release-plans/", _plan(), format="json").json()["id"]
    )
    url = f"/api/v1/release-plans/{plan_id}/actions/"
    remy = api_as(fleet["remy"])
    assert remy.post(url, {"action": "approve"}, format="json").status_code == 409  # pending
    assert remy.post(url, {"action": "resume"}, format="json").status_code == 409  # not halted
    halted = remy.post(url, {"action": "halt", "comment": "incident 7"}, format="json")
    assert halted.status_code == 200 and halted.json()["pending_action"]["action"] == "halt"
    again = remy.post(url, {"action": "rollback"}, format="json")
    assert again.status_code == 409 and "another action is waiting" in again.content.decode()
    ReleasePlan.objects.filter(pk=plan_id).update(phase="SUCCEEDED", pending_action=None)
    assert remy.post(url, {"action": "rollback"}, format="json").status_code == 409
    assert remy.post(url, {"action": "explode"}, format="json").status_code == 400
    assert remy.post("/api/v1/release-plans/999999/actions/", {"action": "halt"},
                     format="json").status_code == 404  # fmt: skip


def test_the_plan_grid_fragment_is_readable_by_any_signed_in_user(fleet, client):
    plan_id = (
        api_as(fleet["rita"]).post("/api/v1/release-plans/", _plan(), format="json").json()["id"]
    )
    client.force_login(fleet["ada"])
    grid = client.get(f"/plans/{plan_id}/grid/")
    assert grid.status_code == 200 and 'data-testid="plan-waves"' in grid.content.decode()
    assert 'id="plan-events"' in grid.content.decode()  # with its approvals and events
    assert 'id="plan-cost"' not in grid.content.decode()  # only when the plan itself changed
    assert 'id="plan-cost"' in client.get(f"/plans/{plan_id}/grid/?cost=1").content.decode()
    page = client.get(f"/plans/{plan_id}/").content.decode()
    assert f'data-ws="/ws/plans/{plan_id}/"' in page and "hx-trigger" not in page
    assert client.post(f"/plans/{plan_id}/act/", {"action": "halt"}).status_code == 403
