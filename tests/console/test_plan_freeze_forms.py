"""The console's forms that start a release plan and declare freezes, against PostgreSQL: what
they write, what they refuse (in the API's words, nothing written), and who may use them."""

from datetime import UTC, datetime

import pytest

from deployments.models import FreezeOverride, FreezeWindow
from plans.models import ReleasePlan
from tests.release_setup import release_world_with_staging

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    return release_world_with_staging(make_user)


def _as(client, user):
    client.force_login(user)
    return client


def _plan_form(fleet, **extra) -> dict:
    return {
        "version_id": str(fleet["versions"][1].pk),
        "on_failure": "rollback",
        "wave-0-clusters": ["staging"],
        "wave-0-steps": "50, 100",
        "wave-0-bake_s": "30",
        "wave-1-clusters": ["prod"],
        "wave-1-approval": "on",
        **extra,
    }


def test_a_release_manager_starts_a_plan_from_the_list_page(fleet, client):
    page = _as(client, fleet["rita"]).get("/plans/").content.decode()
    assert 'data-testid="plan-form"' in page and page.count('data-testid="plan-form-wave"') == 4
    answer = client.post("/plans/start/", _plan_form(fleet))
    plan = ReleasePlan.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/plans/{plan.pk}/"
    assert (plan.candidate, plan.on_failure, plan.created_by) == (
        fleet["versions"][1], "rollback", fleet["rita"])  # fmt: skip
    first, second = plan.waves
    assert first["clusters"] == ["staging"] and first["release"]["steps"] == [50, 100]
    assert first["bake_s"] == 30 and not first["approval"]
    assert second["clusters"] == ["prod"] and second["approval"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"wave-0-steps": "0"}, "wave 1 release steps"),
        ({"wave-1-clusters": ["staging"]}, "in wave 1 already"),
        ({"wave-0-bake_s": "forever"}, "wave 1 bake_s"),
        ({"wave-0-clusters": [], "wave-1-clusters": []}, "at least one wave"),
        ({"version": "risk_score v9"}, "Choose a candidate version"),
        ({"on_failure": "pray"}, "on_failure"),
    ],
)
def test_a_plan_form_that_cannot_run_says_why_and_writes_nothing(fleet, client, change, words):
    answer = _as(client, fleet["rita"]).post("/plans/start/", _plan_form(fleet, **change),
                                             follow=True)  # fmt: skip
    assert answer.redirect_chain[-1][0] == "/plans/"
    assert words in answer.content.decode().replace("&#x27;", "'")
    assert ReleasePlan.objects.count() == 0


def test_only_release_managers_see_and_use_the_plan_form(fleet, client):
    _as(client, fleet["ada"])
    assert 'data-testid="plan-form"' not in client.get("/plans/").content.decode()
    assert client.post("/plans/start/", _plan_form(fleet)).status_code == 403
    assert ReleasePlan.objects.count() == 0


def test_freezes_are_declared_and_deleted_from_the_cluster_page(fleet, client):
    page = _as(client, fleet["rita"]).get("/clusters/prod/").content.decode()
    assert 'data-testid="freeze-form"' in page and 'data-testid="override-form"' in page
    dated = {"reason": "year end", "kind": "dated", "timezone": "Europe/Berlin",
             "starts_at": "2030-12-24T18:00", "ends_at": "2031-01-02T08:00"}  # fmt: skip
    answer = client.post("/clusters/prod/freezes/", dated, follow=True)
    assert "Freeze declared on prod." in answer.content.decode()
    window = FreezeWindow.objects.get()
    assert window.cluster.name == "prod" and window.timezone == "Europe/Berlin"
    assert window.starts_at == datetime(2030, 12, 24, 17, 0, tzinfo=UTC)  # 18:00 in Berlin
    weekly = {"reason": "nights", "kind": "weekly", "weekdays": ["0", "4"], "start": "22:00",
              "end": "06:00", "timezone": "UTC", "fleet_wide": "on"}  # fmt: skip
    answer = client.post("/clusters/prod/freezes/", weekly, follow=True)
    assert "Freeze declared on every cluster." in answer.content.decode()
    nights = FreezeWindow.objects.get(reason="nights")
    assert nights.cluster is None and nights.weekdays == [0, 4]
    page = client.get("/clusters/staging/").content.decode()
    assert "nights" in page and "year end" not in page  # fleet-wide shows on every cluster
    client.post(f"/clusters/staging/freezes/{nights.pk}/delete/")
    assert list(FreezeWindow.objects.values_list("reason", flat=True)) == ["year end"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"reason": ""}, "reason"),
        ({"timezone": "Mars/Olympus"}, "Unknown time zone"),
        ({"ends_at": "2030-12-24T17:00"}, "ends_at must come after starts_at"),
        ({"kind": "weekly", "start": "09:00", "end": "09:00"}, "one of the two"),
        ({"kind": "weekly", "weekdays": ["2"], "start": "09:00", "end": "09:00"}, "end differs"),
    ],
)
def test_a_freeze_form_that_cannot_hold_says_why_and_writes_nothing(fleet, client, change, words):
    body = {"reason": "r", "kind": "dated", "timezone": "UTC", "starts_at": "2030-12-24T18:00",
            "ends_at": "2030-12-25T18:00", **change}  # fmt: skip
    answer = _as(client, fleet["rita"]).post("/clusters/prod/freezes/", body, follow=True)
    assert words in answer.content.decode()
    assert FreezeWindow.objects.count() == 0


def test_an_override_asked_on_the_page_is_approved_by_a_second_release_manager(fleet, client):
    _as(client, fleet["rita"]).post("/clusters/prod/freeze-overrides/",
                                    {"reason": "hotfix INC-7", "hours": "2"})  # fmt: skip
    row = FreezeOverride.objects.get()
    assert row.requested_by == fleet["rita"] and row.approved_at is None
    page = client.get("/clusters/prod/").content.decode()
    assert "override asked" in page and 'data-testid="override-approve"' not in page
    mine = client.post(f"/clusters/prod/freeze-overrides/{row.pk}/approve/", follow=True)
    assert "A second release manager approves" in mine.content.decode()
    row.refresh_from_db()
    assert row.approved_at is None
    _as(client, fleet["remy"])
    assert 'data-testid="override-approve"' in client.get("/clusters/prod/").content.decode()
    client.post(f"/clusters/prod/freeze-overrides/{row.pk}/approve/")
    row.refresh_from_db()
    assert row.approved_by == fleet["remy"] and row.expires_at is not None
    assert "override in force" in client.get("/clusters/prod/").content.decode()
    too_long = client.post("/clusters/prod/freeze-overrides/", {"reason": "x", "hours": "48"},
                           follow=True)  # fmt: skip
    assert "hours" in too_long.content.decode() and FreezeOverride.objects.count() == 1


def test_other_roles_neither_see_nor_use_the_freeze_forms(fleet, client):
    page = _as(client, fleet["ada"]).get("/clusters/prod/").content.decode()
    assert 'data-testid="freeze-form"' not in page
    body = {"reason": "r", "kind": "dated", "starts_at": "2030-12-24T18:00",
            "ends_at": "2030-12-25T18:00"}  # fmt: skip
    assert client.post("/clusters/prod/freezes/", body).status_code == 403
    assert client.post("/clusters/prod/freeze-overrides/", {"reason": "r", "hours": 1}
                       ).status_code == 403  # fmt: skip
    assert FreezeWindow.objects.count() == FreezeOverride.objects.count() == 0
