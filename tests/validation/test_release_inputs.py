"""A release's steps, gates, intervals, sticky header and analysis knobs are typed where
they enter; a junk value already stored stops only that release's tick, with its key."""

import logging
from dataclasses import fields

import pytest
from django.test import Client

from releases.inputs import AnalysisSettings, ReleaseInputError, parse_analysis, parse_steps
from releases.models import Release
from releases.tick import release_tick
from tests.validation.conftest import BODY

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"analysis": {"interval_s": "30s"}}, "analysis.interval_s"),
        ({"analysis": {"interval_s": 0}}, "analysis.interval_s"),
        ({"analysis": {"min_requests": 2.5}}, "analysis.min_requests"),
        ({"analysis": {"min_requests": True}}, "analysis.min_requests"),
        ({"analysis": {"fast_guard_error_floor": 2}}, "analysis.fast_guard_error_floor"),
        ({"analysis": {"latency_tolerance": [1]}}, "analysis.latency_tolerance"),
        ({"analysis": {"speed": 1}}, "analysis.speed"),
        ({"steps": [0, 100]}, "steps"),
        ({"steps": [10, 50]}, "steps"),
        ({"steps": [12.5, 100]}, "steps"),
        ({"steps": list(range(1, 101))}, "steps"),
        ({"manual_gates": [30]}, "manual_gates"),
        ({"sticky_header": "x user"}, "sticky_header"),
        ({"sticky_header": "x-user;drop"}, "sticky_header"),
        ({"sticky_header": "x" * 65}, "sticky_header"),
        ({"step_interval_s": 1e9}, "step_interval_s"),
        ({"progress_deadline_s": 1e12}, "progress_deadline_s"),
    ],
)
def test_unusable_release_settings_are_refused_with_their_field(release_api, extra, field):
    response = release_api.post("/api/v1/releases/", {**BODY, **extra}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field
    assert not Release.objects.exists()


def test_valid_settings_start_a_release(release_api):
    body = {
        **BODY,
        "steps": [10, 50, 100],
        "manual_gates": [50],
        "sticky_header": "x-user-id",
        "analysis": {"interval_s": 10, "min_requests": 20, "latency_tolerance": 1.5},
        "strategy": "blue_green",
    }
    response = release_api.post("/api/v1/releases/", body, format="json")
    assert response.status_code == 400  # gate 50 is not a step of blue_green's one step
    response = release_api.post("/api/v1/releases/", {**body, "strategy": "canary"}, format="json")
    assert response.status_code == 201, response.content
    release = Release.objects.get()
    assert [s["manual_gate"] for s in release.steps] == [False, True, False]
    assert release.analysis_interval_s == 10.0


def test_a_junk_stored_analysis_stops_only_its_own_tick(release_api, caplog):
    response = release_api.post("/api/v1/releases/", BODY, format="json")
    assert response.status_code == 201, response.content
    Release.objects.update(analysis={"interval_s": "30s", "min_requests": "many"})
    with caplog.at_level(logging.ERROR):
        release = release_tick(release_id=response.json()["id"])
        release_tick(release_id=release.pk)  # a second tick repeats the log, not the event
    assert release.phase == "PENDING"
    assert "not ticked" in caplog.text and "analysis.interval_s" in caplog.text
    (event,) = release.events.filter(kind="error")  # recorded on the release, once
    assert event.message.startswith("Not ticked") and "analysis.interval_s" in event.message


def test_rules_are_plain_functions():
    assert parse_analysis({}) == AnalysisSettings()
    assert parse_analysis({"min_requests": 5.0}).min_requests == 5
    assert parse_steps("blue_green", [5, 25], []) == [{"weight": 100.0, "manual_gate": False}]
    with pytest.raises(ReleaseInputError, match="analysis"):
        parse_analysis(["interval_s"])


def test_a_release_stores_every_analysis_setting_it_judges_by(release_api):
    body = {**BODY, "analysis": {"min_requests": 20}}
    response = release_api.post("/api/v1/releases/", body, format="json")
    assert response.status_code == 201, response.json()
    analysis = response.json()["analysis"]
    assert analysis["min_requests"] == 20  # as asked
    defaults = AnalysisSettings()
    assert analysis["max_failed_checks"] == defaults.max_failed_checks  # and every default
    assert analysis["on_node_loss"] == "hold" and analysis["on_inconclusive"] == "pause"
    assert analysis["interval_s"] == BODY["step_interval_s"]  # resolved, not null
    assert set(analysis) == {f.name for f in fields(AnalysisSettings)}
    assert Release.objects.get().analysis == analysis  # stored so, not recomputed
    browser = Client()
    browser.force_login(Release.objects.get().created_by)
    page = browser.get(f"/releases/{response.json()['id']}/")
    assert page.status_code == 200
    assert b"analysis.max_inconclusive_checks" in page.content  # shown on the cockpit


def test_choice_settings_take_their_words_only(release_api):
    for key, value in (("on_node_loss", "pause"), ("on_inconclusive", 1)):
        body = {**BODY, "analysis": {key: value}}
        response = release_api.post("/api/v1/releases/", body, format="json")
        assert response.status_code == 400
        assert response.json()["errors"][0]["field"] == f"analysis.{key}"
