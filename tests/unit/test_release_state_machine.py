"""Table-driven tests of the pure gray-release policy `decide`."""

from dataclasses import dataclass, field, replace

import pytest

from releases.state_machine import (
    ACTIONS,
    TERMINAL,
    TRANSITIONS,
    Decision,
    LoadServingSet,
    MoveAlias,
    Observation,
    Phase,
    SetWeights,
    Spec,
    State,
    Step,
    UnloadCandidate,
    Wait,
    can_transition,
    decide,
)

P = Phase
BOTH = LoadServingSet("baseline+candidate")
KEEP_BASELINE = (SetWeights(0.0), LoadServingSet("baseline"), UnloadCandidate())
SPEC = Spec(
    steps=(Step(5), Step(25), Step(50, manual_gate=True), Step(100)),
    step_interval_s=30,
    min_requests=50,
    max_failed_checks=2,
    latency_tolerance=1.3,
    progress_deadline_s=300,
    drain_s=10,
)
GATED_FIRST = replace(SPEC, steps=(Step(5, manual_gate=True), Step(100)))
BLUE_GREEN = replace(SPEC, steps=(Step(100),), strategy="blue_green")
SHADOWED = replace(SPEC, shadow_s=60)
MIRROR = (SetWeights(0.0, mirror=True), BOTH)


def st(phase: Phase = P.PROGRESSING, **kw) -> State:
    """A state entered at t=0; PROGRESSING defaults to step 1 (25%)."""
    if phase is P.PROGRESSING:
        kw = {"step_index": 1, "candidate_weight": 25.0, **kw}
    return State(phase=phase, **kw)


def ob(now: float = 40, **kw) -> Observation:
    return Observation(now=now, **kw)


def passed(now: float = 40, weight: float = 25, **kw) -> Observation:
    return ob(now, router_applied_weight=weight, verdict="pass", verdict_at=now, **kw)


def act(action: str, **kw) -> Observation:
    return ob(action=action, actor="ana", **kw)


def guard(**kw) -> Observation:
    return ob(fast_guard_tripped=True, fast_guard_reason="40/40 errors", **kw)


def without_wait(d: Decision) -> tuple:
    return tuple(e for e in d.effects if not isinstance(e, Wait))


@dataclass(frozen=True)
class Case:
    id: str
    state: State
    obs: Observation
    phase: Phase
    effects: tuple
    reason: str = ""
    spec: Spec = SPEC
    fields: dict = field(default_factory=dict)


SHADOW = State(phase=P.SHADOWING, step_started_at=0.0)
SHADOW_PASS = ob(70, router_applied_weight=0, router_mirroring=True, verdict="pass", verdict_at=70)
PAUSED_SHADOW = st(P.PAUSED, paused_from=P.SHADOWING)
PAUSED_RUN = st(P.PAUSED, step_index=1, candidate_weight=25.0, paused_from=P.PROGRESSING)
PAUSED_GATE = st(P.PAUSED, step_index=2, candidate_weight=25.0, paused_from=P.WAITING_APPROVAL)
WAITING = st(P.WAITING_APPROVAL, step_index=2, candidate_weight=25.0)
FULL = {"candidate_weight": 100.0}

CASES = [
    Case("pending-starts-loading-pinned-first", st(P.PENDING), ob(1), P.LOADING,
         (SetWeights(0.0), BOTH)),
    Case("pending-rollback-by-human", st(P.PENDING), act("rollback"), P.ROLLING_BACK,
         (SetWeights(0.0),), "rollback by ana"),
    Case("pending-past-deadline-fails", st(P.PENDING), ob(400), P.FAILED, KEEP_BASELINE,
         "no traffic was shifted"),
    Case("loading-ready-and-pinned-starts-step-0", st(P.LOADING),
         ob(candidate_ready=True, router_applied_weight=0), P.PROGRESSING, (SetWeights(5.0), BOTH),
         "0% → 5%", fields={"step_index": 0, "candidate_weight": 5.0, "step_started_at": 40}),
    Case("loading-gated-first-step-waits-at-0", st(P.LOADING),
         ob(candidate_ready=True, router_applied_weight=0), P.WAITING_APPROVAL,
         (SetWeights(0.0), BOTH), "awaiting approval for 5%", GATED_FIRST),
    Case("loading-ready-with-a-shadow-mirrors-first", st(P.LOADING),
         ob(candidate_ready=True, router_applied_weight=0), P.SHADOWING, MIRROR,
         "shadow for 60 s", SHADOWED, fields={"candidate_weight": 0.0, "step_started_at": 40}),
    Case("shadow-passed-enters-step-0", SHADOW, SHADOW_PASS, P.PROGRESSING,
         (SetWeights(5.0), BOTH), "shadow passed", SHADOWED, fields={"candidate_weight": 5.0}),
    Case("shadow-passed-gated-first-step-waits", SHADOW, SHADOW_PASS, P.WAITING_APPROVAL,
         (SetWeights(0.0), BOTH), "awaiting approval for 5%",
         replace(GATED_FIRST, shadow_s=60)),
    Case("shadow-pause", SHADOW, act("pause"), P.PAUSED, MIRROR, "paused by ana", SHADOWED,
         fields={"paused_from": P.SHADOWING}),
    Case("shadow-fail-rolls-back", st(P.SHADOWING, failed_checks=1),
         ob(router_applied_weight=0, router_mirroring=True, verdict="fail", verdict_at=40,
            verdict_reason="errors 9/20"), P.ROLLING_BACK, (SetWeights(0.0),),
         "2/2 failed checks at shadow: errors 9/20", SHADOWED),
    Case("resume-returns-to-the-shadow", PAUSED_SHADOW, act("resume"), P.SHADOWING, MIRROR,
         "resumed by ana", SHADOWED, fields={"step_started_at": 40}),
    Case("loading-rollback-by-human", st(P.LOADING), act("rollback"), P.ROLLING_BACK,
         (SetWeights(0.0),)),
    Case("loading-failure-fails-keeping-baseline", st(P.LOADING),
         ob(load_failed=True, load_error="CUDA out of memory"), P.FAILED, KEEP_BASELINE,
         "candidate failed to load: CUDA out of memory"),
    Case("pass-before-gated-step-waits-for-approval", st(), passed(), P.WAITING_APPROVAL,
         (SetWeights(25.0), BOTH), "awaiting approval for 50%", fields={"step_index": 2}),
    Case("progressing-pause", st(), act("pause"), P.PAUSED, (SetWeights(25.0), BOTH),
         fields={"paused_from": P.PROGRESSING}),
    Case("pass-at-last-step-promotes", st(step_index=3, candidate_weight=100.0),
         passed(weight=100), P.PROMOTING, (SetWeights(100.0), BOTH), "100% passed"),
    Case("progressing-promote-now", st(), act("promote"), P.PROMOTING,
         (SetWeights(100.0), BOTH), "promoted by ana", fields=FULL),
    Case("fail-at-threshold-rolls-back", st(failed_checks=1),
         ob(router_applied_weight=25, verdict="fail", verdict_at=40, verdict_reason="p99 90 > 50"),
         P.ROLLING_BACK, (SetWeights(0.0),), "2/2 failed checks at 25%: p99 90 > 50",
         fields={"failed_checks": 2}),
    Case("approve-enters-gated-step", WAITING, act("approve"), P.PROGRESSING,
         (SetWeights(50.0), BOTH), "25% → 50%: approved by ana",
         fields={"step_index": 2, "candidate_weight": 50.0, "step_started_at": 40}),
    Case("waiting-pause", WAITING, act("pause"), P.PAUSED, (SetWeights(25.0), BOTH),
         fields={"paused_from": P.WAITING_APPROVAL}),
    Case("waiting-promote", WAITING, act("promote"), P.PROMOTING, (SetWeights(100.0), BOTH)),
    Case("waiting-fast-guard-rolls-back", WAITING, guard(), P.ROLLING_BACK, (SetWeights(0.0),),
         "fast guard: 40/40 errors"),
    Case("resume-returns-to-progressing", PAUSED_RUN, act("resume"), P.PROGRESSING,
         (SetWeights(25.0), BOTH), "resumed by ana", fields={"step_started_at": 40}),
    Case("resume-returns-to-waiting", PAUSED_GATE, act("resume"), P.WAITING_APPROVAL,
         (SetWeights(25.0), BOTH)),
    Case("paused-promote", PAUSED_RUN, act("promote"), P.PROMOTING, (SetWeights(100.0), BOTH),
         fields={"paused_from": None}),
    Case("paused-rollback", PAUSED_RUN, act("rollback", action_reason="bad"), P.ROLLING_BACK,
         (SetWeights(0.0),), "rollback by ana: bad"),
    Case("promoting-applied-starts-draining", st(P.PROMOTING, **FULL),
         ob(router_applied_weight=100), P.DRAINING, (SetWeights(100.0), BOTH),
         fields={"phase_started_at": 40}),
    Case("promoting-past-deadline-rolls-back", st(P.PROMOTING, **FULL), ob(400), P.ROLLING_BACK,
         (SetWeights(0.0),), "no progress in PROMOTING"),
    Case("draining-done-succeeds", st(P.DRAINING, **FULL), ob(20, baseline_drained=True),
         P.SUCCEEDED, (SetWeights(100.0), LoadServingSet("candidate"), MoveAlias("production"))),
    Case("draining-fast-guard-rolls-back", st(P.DRAINING, **FULL), guard(), P.ROLLING_BACK,
         (SetWeights(0.0),)),
    Case("rolling-back-done-when-candidate-unloaded", st(P.ROLLING_BACK),
         ob(router_applied_weight=0, in_flight_done=True, candidate_unloaded=True),
         P.ROLLED_BACK, KEEP_BASELINE),
    Case("rolling-back-past-deadline-fails", st(P.ROLLING_BACK), ob(400), P.FAILED,
         KEEP_BASELINE, "the rollback did not complete"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decide_makes_each_table_transition_with_its_effects(case: Case) -> None:
    d = decide(case.spec, case.state, case.obs)
    assert (d.state.phase, d.effects, d.rejected) == (case.phase, case.effects, False)
    assert case.reason in d.state.reason
    assert d.events[0].kind == "phase" and case.reason in d.events[0].message
    for name, value in case.fields.items():
        assert getattr(d.state, name) == value, name


def test_cases_cover_every_transition_in_the_table() -> None:
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert {(c.state.phase, c.phase) for c in CASES} == table


def test_terminal_phases_allow_no_transition() -> None:
    assert all(not TRANSITIONS[p] for p in TERMINAL)
    assert can_transition(P.PENDING, P.LOADING) and not can_transition(P.LOADING, P.SUCCEEDED)


EXPECTED_ACTIONS = {
    "approve": {P.WAITING_APPROVAL},
    "pause": {P.SHADOWING, P.PROGRESSING, P.WAITING_APPROVAL},
    "resume": {P.PAUSED},
    "rollback": set(P) - TERMINAL - {P.ROLLING_BACK},
    "promote": {P.PROGRESSING, P.WAITING_APPROVAL, P.PAUSED},
}
REJECTIONS = [(a, p) for a in EXPECTED_ACTIONS for p in P if p not in EXPECTED_ACTIONS[a]]


def test_allowed_actions_match_the_documented_phases() -> None:
    assert {a: set(phases) for a, phases in ACTIONS.items()} == EXPECTED_ACTIONS


@pytest.mark.parametrize(
    ("action", "phase"), REJECTIONS, ids=[f"{a}-in-{p.value}" for a, p in REJECTIONS]
)
def test_action_that_does_not_fit_the_phase_is_rejected_and_changes_nothing(
    action: str, phase: Phase
) -> None:
    state = st(phase, paused_from=P.PROGRESSING if phase is P.PAUSED else None)
    d = decide(SPEC, state, act(action))
    assert d.rejected and d.state == state and d.effects == ()
    assert d.events[0].kind == "rejected" and action in d.events[0].message


IDEMPOTENT = [
    ("loading-to-step-0", st(P.LOADING), ob(candidate_ready=True, router_applied_weight=0)),
    ("pass-advances-once", st(step_index=0, candidate_weight=5.0), passed(weight=5)),
    ("fail-counts-once", st(), ob(router_applied_weight=25, verdict="fail", verdict_at=40)),
    ("inconclusive-counts-once", st(), ob(router_applied_weight=25, verdict="inconclusive",
                                          verdict_at=40)),
    ("promoting-to-draining", st(P.PROMOTING, **FULL), ob(router_applied_weight=100)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "obs"), [c[1:] for c in IDEMPOTENT], ids=[c[0] for c in IDEMPOTENT]
)
def test_same_observation_twice_does_not_apply_twice(state: State, obs: Observation) -> None:
    first = decide(SPEC, state, obs)
    assert decide(SPEC, state, obs) == first  # pure
    again = decide(SPEC, first.state, obs)
    keys = ("phase", "step_index", "candidate_weight", "failed_checks", "inconclusive_checks")
    assert [getattr(again.state, k) for k in keys] == [getattr(first.state, k) for k in keys]
    assert again.events == () and without_wait(again) == without_wait(first)


def test_repeated_approve_is_rejected_instead_of_skipping_a_step() -> None:
    first = decide(SPEC, WAITING, act("approve"))
    again = decide(SPEC, first.state, act("approve"))
    assert again.rejected and again.state.step_index == 2 and again.state.candidate_weight == 50


def test_pass_advances_with_a_readable_reason() -> None:
    obs = passed(weight=5, verdict_reason="success 99.97 ≥ 99.9, p99 41 ≤ 1.3×38")
    d = decide(SPEC, st(step_index=0, candidate_weight=5.0), obs)
    assert (d.state.step_index, d.state.candidate_weight) == (1, 25.0)
    assert d.events[0].kind == "step"
    assert d.events[0].message == "5% → 25%: success 99.97 ≥ 99.9, p99 41 ≤ 1.3×38"


def test_pass_before_the_step_interval_ends_holds_the_step() -> None:
    d = decide(SPEC, st(), passed(now=10))
    assert (d.state.phase, d.state.step_index, d.state.checked_until) == (P.PROGRESSING, 1, 10)
    assert d.effects[-1] == Wait("step interval", until=30) and d.events[0].kind == "check"
    later = decide(SPEC, d.state, passed(now=31))
    assert later.state.step_index == 2


def test_verdict_is_ignored_until_the_router_serves_the_step_weight() -> None:
    d = decide(SPEC, st(), passed(weight=5))
    assert d.state == st() and d.effects[-1].reason == "router applying 25%"


def test_verdict_from_before_the_step_started_is_ignored() -> None:
    state = st(step_started_at=50)
    d = decide(SPEC, state, ob(60, router_applied_weight=25, verdict="pass", verdict_at=45))
    assert d.state == state and d.events == ()


def test_fail_below_threshold_counts_and_stays() -> None:
    obs = ob(router_applied_weight=25, verdict="fail", verdict_at=40, verdict_reason="p99 90 > 50")
    d = decide(SPEC, st(), obs)
    assert (d.state.phase, d.state.failed_checks) == (P.PROGRESSING, 1)
    assert "1/2 failed checks at 25%" in d.events[0].message


def test_inconclusive_intervals_are_counted_apart_and_neither_advance_nor_fail() -> None:
    state = st()
    for t in (40, 70, 100):
        obs = ob(t, router_applied_weight=25, verdict="inconclusive", verdict_at=t,
                 verdict_reason="31 requests < 50")  # fmt: skip
        state = decide(SPEC, state, obs).state
    assert (state.phase, state.step_index, state.failed_checks) == (P.PROGRESSING, 1, 0)
    assert state.inconclusive_checks == 3


def test_fast_guard_rolls_back_at_once_mid_interval() -> None:
    d = decide(SPEC, st(), guard(now=5, router_applied_weight=25))
    assert d.state.phase is P.ROLLING_BACK and d.effects == (SetWeights(0.0),)
    assert "fast guard: 40/40 errors" in d.events[0].message


def test_fast_guard_wins_over_a_valid_approval() -> None:
    d = decide(SPEC, WAITING, guard(action="approve", actor="ana"))
    assert d.state.phase is P.ROLLING_BACK and "approve by ana ignored" in d.state.reason


def test_fast_guard_is_ignored_while_the_candidate_gets_no_traffic() -> None:
    d = decide(SPEC, st(P.LOADING), guard())
    assert d.state.phase is P.LOADING


def test_deadline_rolls_back_a_step_stuck_on_inconclusive_intervals() -> None:
    state = st(step_started_at=100, inconclusive_checks=9)
    d = decide(SPEC, state, ob(400, router_applied_weight=25))
    assert d.state.phase is P.ROLLING_BACK
    assert "no progress in PROGRESSING for 300 s" in d.state.reason
    assert "candidate had 25%" in d.state.reason


def test_deadline_counts_from_the_latest_step_not_the_phase_start() -> None:
    d = decide(SPEC, st(step_started_at=200), ob(400, router_applied_weight=25))
    assert d.state.phase is P.PROGRESSING


@pytest.mark.parametrize("state", [WAITING, PAUSED_RUN], ids=["waiting", "paused"])
def test_phases_waiting_on_a_human_never_hit_the_deadline(state: State) -> None:
    assert decide(SPEC, state, ob(10_000)).state == state


def test_loading_stuck_past_deadline_fails_without_shifting_traffic() -> None:
    d = decide(SPEC, st(P.LOADING), ob(300, candidate_ready=False))
    assert d.state.phase is P.FAILED and d.effects == KEEP_BASELINE


def test_loading_waits_for_the_router_pin_before_the_first_step() -> None:
    d = decide(SPEC, st(P.LOADING), ob(candidate_ready=True, router_applied_weight=None))
    assert d.state.phase is P.LOADING and d.effects[:2] == (SetWeights(0.0), BOTH)


def test_manual_gate_holds_weight_until_approved() -> None:
    state = decide(SPEC, st(), passed()).state
    assert (state.phase, state.candidate_weight) == (P.WAITING_APPROVAL, 25.0)
    held = decide(SPEC, state, passed(now=90))
    assert held.state == state and held.effects[-1] == Wait("approval to go to 50%")
    assert decide(SPEC, state, act("approve")).state.candidate_weight == 50.0


def test_gated_first_step_is_approved_from_zero() -> None:
    state = st(P.WAITING_APPROVAL, step_index=0)
    d = decide(GATED_FIRST, state, act("approve"))
    assert (d.state.phase, d.state.candidate_weight) == (P.PROGRESSING, 5.0)


def test_resume_restarts_the_step_clock() -> None:
    d = decide(SPEC, replace(PAUSED_RUN, step_started_at=0), act("resume", now=500))
    assert (d.state.step_started_at, d.state.phase_started_at) == (500, 500)


def test_draining_waits_for_drain_period_and_baseline_in_flight() -> None:
    state = st(P.DRAINING, **FULL)
    assert decide(SPEC, state, ob(5, baseline_drained=True)).effects[-1] == Wait(
        "drain period", until=10
    )
    d = decide(SPEC, state, ob(20, baseline_drained=False))
    assert d.state.phase is P.DRAINING and d.effects[-1].reason.startswith("in-flight")


def test_rollback_unloads_the_candidate_only_after_it_is_idle() -> None:
    state = st(P.ROLLING_BACK)
    busy = decide(SPEC, state, ob(router_applied_weight=0, in_flight_done=False))
    assert without_wait(busy) == (SetWeights(0.0),)
    idle = decide(SPEC, state, ob(router_applied_weight=0, in_flight_done=True))
    assert idle.state.phase is P.ROLLING_BACK and without_wait(idle) == KEEP_BASELINE


def test_finished_release_does_nothing() -> None:
    d = decide(SPEC, st(P.SUCCEEDED), ob())
    assert d == Decision(st(P.SUCCEEDED))


def test_canary_walks_all_steps_to_success() -> None:
    state, t = State.start(0), 0.0

    def tick(**kw) -> State:
        nonlocal state, t
        t += 1
        state = decide(SPEC, state, Observation(now=t, **kw)).state
        return state

    tick()
    tick(candidate_ready=True, router_applied_weight=0)
    for weight in (5, 25, 50, 100):
        if state.phase is P.WAITING_APPROVAL:
            tick(action="approve", actor="ana")
        t += 30
        tick(router_applied_weight=weight, verdict="pass", verdict_at=t + 1)
    assert state.phase is P.PROMOTING
    tick(router_applied_weight=100)
    t += 10
    assert tick(baseline_drained=True).phase is P.SUCCEEDED


def test_blue_green_is_one_step_of_100_with_the_same_drain() -> None:
    state = decide(BLUE_GREEN, st(P.LOADING), ob(candidate_ready=True, router_applied_weight=0))
    assert (state.state.phase, state.state.candidate_weight) == (P.PROGRESSING, 100.0)
    d = decide(BLUE_GREEN, state.state, passed(now=80, weight=100))
    assert d.state.phase is P.PROMOTING


@pytest.mark.parametrize(
    "kw",
    [
        {"steps": ()},
        {"steps": (Step(25), Step(5))},
        {"steps": (Step(0),)},
        {"steps": (Step(5), Step(100)), "strategy": "blue_green"},
        {"max_failed_checks": 0},
        {"progress_deadline_s": 30},
    ],
    ids=["no-steps", "decreasing", "zero-weight", "blue-green-two-steps", "zero-fails", "deadline"],
)
def test_spec_rejects_inconsistent_settings(kw: dict) -> None:
    with pytest.raises(ValueError):
        replace(SPEC, **kw)


def test_observation_requires_the_interval_end_of_a_verdict() -> None:
    with pytest.raises(ValueError):
        Observation(now=1, verdict="pass")


def test_node_loss_holds_the_weight_says_why_once_and_counts_no_verdict_of_the_hold() -> None:
    out = passed(now=40, nodes_out=("n2",))
    decision = decide(SPEC, st(), out)
    assert decision.state.phase is P.PROGRESSING and decision.state.candidate_weight == 25.0
    assert decision.state.reason.startswith("holding at 25%: node(s) n2 not serving")
    assert [e.kind for e in decision.events] == ["check"]
    assert decision.effects[:2] == (SetWeights(25.0), BOTH)
    assert decision.state.checked_until == 40  # the hold's verdict is spent, never counted
    again = decide(SPEC, decision.state, passed(now=41, nodes_out=("n2",)))
    assert again.events == () and again.state.step_index == 1  # said once; no step taken
    back = decide(SPEC, again.state, passed(now=42))
    assert back.state.phase is P.PROGRESSING and back.state.step_index == 1
    assert "resuming at 25%" in back.state.reason and back.events[0].kind == "check"
    advanced = decide(SPEC, back.state, passed(now=43))
    assert advanced.state.step_index == 2 or advanced.state.phase is P.WAITING_APPROVAL


def test_node_loss_rolls_back_when_so_configured() -> None:
    spec = replace(SPEC, on_node_loss="rollback")
    decision = decide(spec, st(), ob(router_applied_weight=25, nodes_out=("n1", "n2")))
    assert decision.state.phase is P.ROLLING_BACK
    assert "n1, n2 not serving the candidate at 25% (on_node_loss: rollback)" in (
        decision.state.reason
    )


def test_node_loss_is_bounded_by_the_progress_deadline() -> None:
    held = decide(SPEC, st(), ob(router_applied_weight=25, nodes_out=("n2",))).state
    late = decide(SPEC, held, ob(now=400, router_applied_weight=25, nodes_out=("n2",)))
    assert late.state.phase is P.ROLLING_BACK and "no progress" in late.state.reason


def test_node_loss_outside_a_step_changes_nothing() -> None:
    loading = decide(SPEC, st(P.LOADING), ob(router_applied_weight=0, nodes_out=("n2",)))
    assert loading.state.phase is P.LOADING  # the candidate is still loading: not a loss


def _inconclusive(now: float, **kw) -> Observation:
    return ob(now, router_applied_weight=25, verdict="inconclusive", verdict_at=now, **kw)


def test_too_many_inconclusive_checks_pause_the_release_and_say_why() -> None:
    spec = replace(SPEC, max_inconclusive_checks=3)
    state = st(step_started_at=0)
    for now in (10, 20):
        state = decide(spec, state, _inconclusive(now)).state
        assert state.phase is P.PROGRESSING
    paused = decide(spec, state, _inconclusive(30))
    assert paused.state.phase is P.PAUSED and paused.state.paused_from is P.PROGRESSING
    assert "3/3 inconclusive checks at 25%" in paused.state.reason
    assert "resume, promote or roll back" in paused.state.reason
    resumed = decide(spec, paused.state, act("resume", now=40)).state
    assert resumed.phase is P.PROGRESSING and resumed.inconclusive_checks == 0  # counts anew


def test_too_many_inconclusive_checks_roll_back_when_so_configured() -> None:
    spec = replace(SPEC, max_inconclusive_checks=1, on_inconclusive="rollback")
    decision = decide(spec, st(step_started_at=0), _inconclusive(10))
    assert decision.state.phase is P.ROLLING_BACK and "too little traffic" in decision.state.reason


def test_the_cause_of_a_rollback_outlives_the_phases_that_follow_it() -> None:
    d = decide(SPEC, st(), guard(now=5, router_applied_weight=25))
    assert d.state.cause == "fast guard: 40/40 errors"
    idle = ob(now=6, router_applied_weight=0.0, in_flight_done=True, candidate_unloaded=True)
    done = decide(SPEC, d.state, idle)
    assert done.state.phase is P.ROLLED_BACK
    assert done.state.reason == "candidate at 0% and unloaded; baseline serving"
    assert done.state.cause == "fast guard: 40/40 errors"


def test_a_failed_rollback_keeps_its_cause_and_says_what_failed_after() -> None:
    rolling = st(P.ROLLING_BACK, cause="rollback by ana", phase_started_at=0)
    d = decide(SPEC, rolling, ob(now=SPEC.progress_deadline_s + 1))
    assert d.state.phase is P.FAILED
    assert d.state.cause.startswith("rollback by ana; then ")
    assert "the rollback did not complete" in d.state.cause


def test_a_promotion_says_which_step_passed_and_a_later_rollback_replaces_it() -> None:
    last = st(step_index=3, candidate_weight=100.0)
    d = decide(SPEC, last, passed(weight=100))
    assert d.state.phase is P.PROMOTING and d.state.cause == d.state.reason
    back = decide(SPEC, d.state, act("rollback"))
    assert back.state.phase is P.ROLLING_BACK and back.state.cause == "rollback by ana"


FROZEN = "prod is frozen until 2026-12-26 06:00 UTC (holidays)"


def test_a_frozen_cluster_pauses_a_passing_release_at_its_next_gate() -> None:
    d = decide(SPEC, st(), passed(frozen=FROZEN))
    assert d.state.phase is P.PAUSED and d.state.paused_from is P.PROGRESSING
    assert d.state.candidate_weight == 25.0  # no step further
    assert "not going to 50%" in d.state.reason and FROZEN in d.state.reason
    last = st(step_index=3, candidate_weight=100.0)  # passing its last step: no promotion
    d = decide(SPEC, last, passed(weight=100, frozen=FROZEN))
    assert d.state.phase is P.PAUSED and "not going to 100%" in d.state.reason


def test_a_loading_release_holds_at_zero_while_frozen_and_rollbacks_are_never_frozen() -> None:
    loading = st(P.LOADING, step_index=0, candidate_weight=0.0)
    d = decide(SPEC, loading, ob(candidate_ready=True, router_applied_weight=0.0, frozen=FROZEN))
    assert d.state.phase is P.LOADING and any(
        isinstance(e, Wait) and e.reason == FROZEN for e in d.effects
    )
    d = decide(SPEC, st(), act("rollback", frozen=FROZEN))
    assert d.state.phase is P.ROLLING_BACK
    d = decide(SPEC, st(), guard(frozen=FROZEN))
    assert d.state.phase is P.ROLLING_BACK


def test_promote_and_approve_by_hand_do_not_advance_into_a_freeze() -> None:
    d = decide(SPEC, st(), act("promote", frozen=FROZEN))
    assert d.rejected and d.state.phase is P.PROGRESSING
    gate = st(P.WAITING_APPROVAL, step_index=2, candidate_weight=25.0)
    d = decide(SPEC, gate, act("approve", frozen=FROZEN))
    assert d.state.phase is P.PAUSED and d.state.candidate_weight == 25.0


def test_a_shadow_waits_for_the_mirror_and_holds_a_pass_until_its_time_is_up():
    waiting = decide(SHADOWED, SHADOW, ob(10, router_applied_weight=0))
    assert waiting.state.phase is P.SHADOWING and without_wait(waiting) == MIRROR
    assert "router mirroring" in [e for e in waiting.effects if isinstance(e, Wait)][0].reason
    early = ob(30, router_applied_weight=0, router_mirroring=True, verdict="pass", verdict_at=30)
    held = decide(SHADOWED, SHADOW, early)
    assert held.state.phase is P.SHADOWING and held.state.checked_until == 30
    assert (
        held.events[0].kind == "check"
        and "mirroring until the shadow ends" in held.events[0].message
    )
    guarded = decide(SHADOWED, SHADOW, guard())
    assert guarded.state.phase is P.ROLLING_BACK and "fast guard" in guarded.state.reason
    with pytest.raises(ValueError, match="shadow_s"):
        replace(SPEC, shadow_s=300)
