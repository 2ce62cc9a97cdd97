"""The release plan's pure policy (plans/state_machine.py): waves, the barrier, bake, approvals,
failure policy and a person's halt/resume/rollback; the transition table in
docs/RELEASE_PLANS.md is the code's."""

import itertools
import re
from pathlib import Path

import pytest

from plans.state_machine import (
    TRANSITIONS,
    Observation,
    PauseReleases,
    Phase,
    ResumeReleases,
    RollbackReleases,
    StartReleases,
    State,
    Wave,
    can_transition,
    decide,
)

P = Phase
WAVES = (Wave(("staging",), bake_s=60), Wave(("eu", "us"), bake_s=30, approval=True))


def state(phase=P.PENDING, wave=0, **kw) -> State:
    return State(phase, wave, WAVES, **kw)


def test_a_plan_starts_its_first_wave_on_every_cluster():
    d = decide(state(), Observation(now=100, releases={"staging": None}))
    assert d.phase is P.RUNNING and d.effects == (StartReleases(("staging",)),)
    assert "wave 1 started on staging" in d.event


def test_the_barrier_waits_for_every_release_of_the_wave_then_bakes():
    running = state(P.RUNNING, 1, baked_from=None)
    d = decide(running, Observation(now=100, releases={"eu": "SUCCEEDED", "us": "PROGRESSING"}))
    assert d.phase is P.RUNNING and d.effects == ()
    d = decide(running, Observation(now=100, releases={"eu": "SUCCEEDED", "us": "SUCCEEDED"}))
    assert d.phase is P.BAKING and d.baked_from == 100


def test_a_wave_bakes_for_its_time_before_the_next_one_asks_for_approval():
    baking = state(P.BAKING, 0, baked_from=100.0)
    assert decide(baking, Observation(now=159, releases={"staging": "SUCCEEDED"})).phase is P.BAKING
    d = decide(baking, Observation(now=160, releases={"staging": "SUCCEEDED"}))
    assert d.phase is P.WAITING_APPROVAL and d.wave_index == 1 and d.effects == ()
    assert d.baked_from is None


def test_an_approval_starts_the_wave_and_a_refusal_ends_the_plan():
    waiting = state(P.WAITING_APPROVAL, 1)
    seen = {"eu": None, "us": None}
    assert decide(waiting, Observation(now=1, releases=seen)).phase is P.WAITING_APPROVAL
    d = decide(waiting, Observation(now=1, releases=seen, approval="approved"))
    assert d.phase is P.RUNNING and d.effects == (StartReleases(("eu", "us")),)
    assert decide(waiting, Observation(now=1, releases=seen, approval="refused")).phase is P.REFUSED


def test_the_last_wave_baked_is_success():
    baking = state(P.BAKING, 1, baked_from=0.0)
    d = decide(baking, Observation(now=30, releases={"eu": "SUCCEEDED", "us": "SUCCEEDED"}))
    assert d.phase is P.SUCCEEDED


@pytest.mark.parametrize("failed", ["ROLLED_BACK", "FAILED"])
def test_a_release_that_fails_halts_the_plan_and_pauses_the_others(failed):
    running = state(P.RUNNING, 1)
    d = decide(running, Observation(now=5, releases={"eu": failed, "us": "PROGRESSING"}))
    assert d.phase is P.HALTED and d.effects == (PauseReleases(),)
    assert f"eu: {failed.lower()}" in d.reason


def test_with_the_rollback_policy_every_release_of_the_plan_rolls_back():
    running = state(P.RUNNING, 1, on_failure="rollback")
    d = decide(running, Observation(now=5, releases={"eu": "ROLLED_BACK", "us": "PROGRESSING"}))
    assert d.phase is P.ROLLING_BACK and d.effects == (RollbackReleases(),)
    rolling = state(P.ROLLING_BACK, 1)
    assert decide(rolling, Observation(now=6, any_active=True)).effects == (RollbackReleases(),)
    assert decide(rolling, Observation(now=7, any_active=False)).phase is P.ROLLED_BACK


def test_a_release_that_could_not_start_is_a_failure_of_the_wave():
    errors = {"staging": "v2 is not smoke-tested"}
    obs = Observation(now=1, releases={"staging": None}, start_errors=errors)
    d = decide(state(P.RUNNING), obs)
    assert d.phase is P.HALTED and "staging: could not start (v2 is not smoke-tested)" in d.reason


def test_halt_pauses_everything_and_resume_goes_on_where_it_was():
    running = state(P.RUNNING, 1)
    d = decide(running, Observation(now=1, releases={"eu": "PROGRESSING"}, action="halt"))
    assert d.phase is P.HALTED and d.effects == (PauseReleases(),)
    halted = state(P.HALTED, 1, reason="halted by hand")
    assert decide(halted, Observation(now=2)).effects == (PauseReleases(),)  # kept paused
    d = decide(halted, Observation(now=3, releases={"eu": "PAUSED", "us": None}, action="resume"))
    assert d.phase is P.RUNNING and d.effects == (ResumeReleases(),)
    # Halted before any release of an approval wave started: resume asks for the approval.
    d = decide(halted, Observation(now=3, releases={"eu": None, "us": None}, action="resume"))
    assert d.phase is P.WAITING_APPROVAL


def test_rollback_by_hand_from_any_phase_that_has_not_ended():
    for phase in (P.PENDING, P.WAITING_APPROVAL, P.RUNNING, P.BAKING, P.HALTED):
        d = decide(state(phase, baked_from=0.0), Observation(now=1, action="rollback"))
        assert d.phase is P.ROLLING_BACK and d.effects == (RollbackReleases(),)


def test_an_ended_plan_does_nothing():
    for phase in (P.SUCCEEDED, P.REFUSED, P.ROLLED_BACK):
        d = decide(state(phase), Observation(now=1, action="rollback", any_active=True))
        assert d.phase is phase and d.effects == ()


def test_every_decision_is_a_transition_the_table_allows():
    release_phases = [None, "LOADING", "PROGRESSING", "PAUSED", "SUCCEEDED", "ROLLED_BACK"]
    for phase, wave, action, approval, active in itertools.product(
        list(P), (0, 1), (None, "halt", "resume", "rollback"), (None, "approved", "refused"),
        (False, True),
    ):  # fmt: skip
        clusters = WAVES[wave].clusters
        for seen in itertools.product(release_phases, repeat=len(clusters)):
            obs = Observation(now=1000, releases=dict(zip(clusters, seen, strict=True)),
                              approval=approval, action=action, any_active=active)  # fmt: skip
            d = decide(state(phase, wave, baked_from=0.0), obs)
            assert d.phase is phase or can_transition(phase, d.phase), (phase, obs, d)


def test_the_documented_table_is_the_code():
    text = Path(__file__).resolve().parents[2].joinpath("docs/RELEASE_PLANS.md").read_text()
    rows = re.findall(r"^\| ([A-Z_]+) \| ([A-Z_, ]+) \|$", text, flags=re.M)
    documented = {P(a): frozenset(P(x.strip()) for x in b.split(",")) for a, b in rows}
    assert documented == {a: b for a, b in TRANSITIONS.items() if b}


def test_a_frozen_cluster_gets_no_release_until_its_freeze_ends():
    frozen = {"us": "us is frozen until 2026-12-26 06:00 UTC (holidays)"}
    obs = Observation(now=1, releases={"eu": None, "us": None}, approval="approved", held=frozen)
    d = decide(state(P.WAITING_APPROVAL, 1), obs)
    assert d.phase is P.RUNNING and d.effects == (StartReleases(("eu",)),)
    assert "waits: us is frozen until 2026-12-26 06:00 UTC (holidays)" in d.reason
    running = state(P.RUNNING, 1)
    seen = {"eu": "SUCCEEDED", "us": None}
    d = decide(running, Observation(now=2, releases=seen, held=frozen))
    assert d.phase is P.RUNNING and d.effects == () and "us is frozen" in d.reason
    d = decide(running, Observation(now=3, releases=seen))  # the freeze ended
    assert d.effects == (StartReleases(("us",)),)
