"""What a tick saves: the columns it changed, found over every column of Release (no list
of column names kept by hand), and whether the cockpit can see the change."""

from dataclasses import replace
from types import SimpleNamespace

from releases import tick
from releases.models import Release
from releases.state_machine import Phase


def _release() -> Release:
    return Release(
        steps=[{"weight": 25.0, "manual_gate": False}, {"weight": 100.0, "manual_gate": False}],
        phase=Phase.PROGRESSING.value,
        step_index=0,
        candidate_weight=25.0,
        router_weight=25.0,
        interval={"marker": [0, 25.0], "start": {"at": 1.0, "log_offset": 0, "nodes": {}}},
    )


def test_a_quiet_tick_changes_no_column():
    release = _release()
    before = tick._snapshot(release)
    assert tick._changes(release, before, SimpleNamespace(state=release.state())) == {}


def test_the_state_and_what_observing_and_applying_set_on_the_row_are_the_changes():
    release = _release()
    before = tick._snapshot(release)
    release.interval["start"]["nodes"]["a"] = {"1": {"success": 3.0}}  # changed in place
    release.applied_serving = "baseline+candidate"
    state = replace(release.state(), step_index=1, candidate_weight=100.0, reason="25% passed")
    changes = tick._changes(release, before, SimpleNamespace(state=state))
    assert changes == {
        "interval": release.interval,
        "applied_serving": "baseline+candidate",
        "step_index": 1,
        "candidate_weight": 100.0,
        "reason": "25% passed",
    }
    assert tick._seen_change(release, before, changes)


def test_a_change_the_cockpit_does_not_show_publishes_nothing():
    release = _release()
    before = tick._snapshot(release)
    release.interval = {"marker": [0, 25.0], "start": {"at": 2.0, "log_offset": 9, "nodes": {}}}
    changes = tick._changes(release, before, SimpleNamespace(state=release.state()))
    assert list(changes) == ["interval"]
    assert not tick._seen_change(release, before, changes)


def test_every_column_of_the_model_is_compared_a_new_one_included():
    compared = set(tick._snapshot(_release())["columns"])
    assert {f.attname for f in Release._meta.concrete_fields} == compared
