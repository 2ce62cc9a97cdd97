"""The gray-release policy as a pure function: phases, allowed transitions and `decide`.

No ORM, network or clock: the tick observes the world, passes the time in, and applies the
returned effects in order, stopping at the first that fails. Every effect is desired state
("the candidate should get 25%"), never an increment, so applying a decision twice is harmless.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Literal


class Phase(str, Enum):  # noqa: UP042 - the brief asks for a str Enum; values equal names
    PENDING = "PENDING"
    LOADING = "LOADING"
    SHADOWING = "SHADOWING"
    PROGRESSING = "PROGRESSING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    PAUSED = "PAUSED"
    PROMOTING = "PROMOTING"
    DRAINING = "DRAINING"
    SUCCEEDED = "SUCCEEDED"
    ROLLING_BACK = "ROLLING_BACK"
    ROLLED_BACK = "ROLLED_BACK"
    FAILED = "FAILED"


P = Phase
TERMINAL: frozenset[Phase] = frozenset({P.SUCCEEDED, P.ROLLED_BACK, P.FAILED})

TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    P.PENDING: frozenset({P.LOADING, P.ROLLING_BACK, P.FAILED}),
    P.LOADING: frozenset(
        {P.SHADOWING, P.PROGRESSING, P.WAITING_APPROVAL, P.ROLLING_BACK, P.FAILED}
    ),
    P.SHADOWING: frozenset({P.PROGRESSING, P.WAITING_APPROVAL, P.PAUSED, P.ROLLING_BACK}),
    P.PROGRESSING: frozenset({P.WAITING_APPROVAL, P.PAUSED, P.PROMOTING, P.ROLLING_BACK}),
    P.WAITING_APPROVAL: frozenset({P.PROGRESSING, P.PAUSED, P.PROMOTING, P.ROLLING_BACK}),
    P.PAUSED: frozenset(
        {P.SHADOWING, P.PROGRESSING, P.WAITING_APPROVAL, P.PROMOTING, P.ROLLING_BACK}
    ),
    P.PROMOTING: frozenset({P.DRAINING, P.ROLLING_BACK}),
    P.DRAINING: frozenset({P.SUCCEEDED, P.ROLLING_BACK}),
    P.ROLLING_BACK: frozenset({P.ROLLED_BACK, P.FAILED}),
    P.SUCCEEDED: frozenset(),
    P.ROLLED_BACK: frozenset(),
    P.FAILED: frozenset(),
}

Action = Literal["approve", "pause", "resume", "rollback", "promote"]
# The phases in which each human action is accepted; anything else is rejected (HTTP 409).
ACTIONS: dict[str, frozenset[Phase]] = {
    "approve": frozenset({P.WAITING_APPROVAL}),
    "pause": frozenset({P.SHADOWING, P.PROGRESSING, P.WAITING_APPROVAL}),
    "resume": frozenset({P.PAUSED}),
    "rollback": frozenset(set(Phase) - TERMINAL - {P.ROLLING_BACK}),
    "promote": frozenset({P.PROGRESSING, P.WAITING_APPROVAL, P.PAUSED}),
}
# Phases in which the candidate may be serving traffic (a copy of it while SHADOWING), so
# the fast guard applies.
GUARDED: frozenset[Phase] = frozenset(
    {P.SHADOWING, P.PROGRESSING, P.WAITING_APPROVAL, P.PAUSED, P.PROMOTING, P.DRAINING}
)
# Phases whose analysis intervals are judged (a verdict per interval).
JUDGED: frozenset[Phase] = frozenset({P.SHADOWING, P.PROGRESSING})
# Phases that wait on a human, so the progress deadline does not apply.
WAITING_ON_HUMAN: frozenset[Phase] = frozenset({P.PAUSED, P.WAITING_APPROVAL})


def can_transition(a: Phase, b: Phase) -> bool:
    """True when the table allows moving from phase `a` to phase `b`."""
    return b in TRANSITIONS[a]


@dataclass(frozen=True)
class Step:
    weight: float  # percent of the model's unversioned traffic sent to the candidate
    manual_gate: bool = False  # a human must approve before this step starts

    def __post_init__(self) -> None:
        object.__setattr__(self, "weight", float(self.weight))


@dataclass(frozen=True)
class Spec:
    steps: tuple[Step, ...]
    step_interval_s: float
    min_requests: int
    max_failed_checks: int
    latency_tolerance: float
    progress_deadline_s: float
    drain_s: float
    strategy: Literal["canary", "blue_green"] = "canary"
    # A node that stops serving the candidate mid-release: hold the weight until every node
    # serves it again (the progress deadline still bounds the hold), or roll back at once.
    on_node_loss: Literal["hold", "rollback"] = "hold"
    # Inconclusive intervals (too few requests) at one step before the release pauses (or
    # rolls back) saying why, instead of waiting for traffic that may never come.
    max_inconclusive_checks: int = 10
    on_inconclusive: Literal["pause", "rollback"] = "pause"
    # Seconds of shadow before the first step: the router mirrors a share of the model's
    # requests to the candidate (answers discarded) while clients get the baseline's; 0: none.
    shadow_s: float = 0.0

    def __post_init__(self) -> None:
        weights = [s.weight for s in self.steps]
        if not weights or any(not 0 < w <= 100 for w in weights):
            raise ValueError("steps need weights in (0, 100]")
        if weights != sorted(set(weights)):
            raise ValueError("step weights must strictly increase")
        if self.strategy == "blue_green" and weights != [100]:
            raise ValueError("blue_green is exactly one step of 100%")
        if self.min_requests < 1 or self.max_failed_checks < 1 or self.latency_tolerance < 1:
            raise ValueError("min_requests, max_failed_checks and latency_tolerance must be >= 1")
        if self.progress_deadline_s <= max(self.step_interval_s, self.drain_s):
            raise ValueError("progress_deadline_s must exceed step_interval_s and drain_s")
        if self.on_node_loss not in ("hold", "rollback"):
            raise ValueError("on_node_loss is hold or rollback")
        if self.on_inconclusive not in ("pause", "rollback") or self.max_inconclusive_checks < 1:
            raise ValueError("on_inconclusive is pause or rollback, after at least 1 check")
        if not 0 <= self.shadow_s < self.progress_deadline_s:
            raise ValueError("shadow_s must be 0 or more and under progress_deadline_s")


@dataclass(frozen=True)
class State:
    phase: Phase
    step_index: int = 0  # the step the release is at, or waiting (for approval) to enter
    candidate_weight: float = 0.0
    failed_checks: int = 0
    inconclusive_checks: int = 0
    step_started_at: float = 0.0
    phase_started_at: float = 0.0
    paused_from: Phase | None = None
    reason: str = ""
    # Why the release ends the way it does (the API's `outcome_reason`): the reason it turned
    # to roll back or fail (the first one, kept through the phases that follow), or why it
    # was promoted. `reason` is the latest phase's message ("candidate at 0% and unloaded").
    cause: str = ""
    # End of the last analysis interval already counted: keeps `decide` from counting a verdict
    # twice when the same observation comes again.
    checked_until: float | None = None

    @classmethod
    def start(cls, now: float) -> State:
        """The state of a release just created at `now`."""
        return cls(phase=P.PENDING, step_started_at=now, phase_started_at=now)


Verdict = Literal["pass", "fail", "inconclusive"]


@dataclass(frozen=True)
class Observation:
    now: float
    candidate_ready: bool = False  # every node has the candidate READY
    load_failed: bool = False
    load_error: str = ""
    router_applied_weight: float | None = None  # candidate % the router serves now; None=unknown
    router_mirroring: bool = False  # the router mirrors the release's shadow share now
    verdict: Verdict | None = None  # latest completed analysis interval of the current step
    verdict_reason: str = ""
    verdict_at: float | None = None  # end of the interval that verdict covers
    fast_guard_tripped: bool = False
    fast_guard_reason: str = ""
    action: Action | None = None
    actor: str = ""
    action_reason: str = ""
    baseline_drained: bool = False  # in-flight requests on the baseline are done
    candidate_unloaded: bool = False
    in_flight_done: bool = False  # in-flight requests on the candidate are done
    # Nodes of the cluster that do not serve the candidate READY now (not answering, or
    # answering without it: restarted empty and not yet loaded again).
    nodes_out: tuple[str, ...] = ()
    # Why the cluster may not advance a change now ('' when it may): a freeze window
    # (deployments/freezes.py). The release holds or pauses at its next gate; rollbacks go on.
    frozen: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in (None, "pass", "fail", "inconclusive"):
            raise ValueError(f"unknown verdict {self.verdict!r}")
        if self.verdict is not None and self.verdict_at is None:
            raise ValueError("a verdict needs verdict_at (the end of its interval)")
        if self.action is not None and self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}")


@dataclass(frozen=True)
class SetWeights:
    candidate: float  # percent to the candidate; the baseline gets the rest
    # Mirror the release's shadow share of the model's requests to the candidate (SHADOWING).
    mirror: bool = False


@dataclass(frozen=True)
class LoadServingSet:
    versions: Literal["baseline+candidate", "candidate", "baseline"]


@dataclass(frozen=True)
class MoveAlias:
    alias: str = "production"


@dataclass(frozen=True)
class UnloadCandidate:
    pass


@dataclass(frozen=True)
class Wait:
    reason: str
    until: float | None = None  # when the awaited thing is due, if known (cockpit countdown)


Effect = SetWeights | LoadServingSet | MoveAlias | UnloadCandidate | Wait


@dataclass(frozen=True)
class Event:
    kind: str  # "phase", "step", "check" or "rejected"
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    state: State
    effects: tuple[Effect, ...] = ()
    events: tuple[Event, ...] = ()
    rejected: bool = False


BOTH = LoadServingSet("baseline+candidate")


def decide(spec: Spec, state: State, obs: Observation) -> Decision:
    """The next state, its desired effects and events; never leaves the transition table."""
    decision = _decide(spec, state, obs)
    new = decision.state.phase
    assert new == state.phase or can_transition(state.phase, new), f"{state.phase} -> {new}"
    return decision


def _decide(spec: Spec, state: State, obs: Observation) -> Decision:
    """Precedence: finished, then human rollback, fast guard, other actions, deadline, phase."""
    if state.phase in TERMINAL:
        return _reject(state, obs, "the release is finished") if obs.action else Decision(state)
    if obs.action is not None and state.phase not in ACTIONS[obs.action]:
        return _reject(state, obs, f"{obs.action} is not allowed in {state.phase.value}")
    if obs.action == "rollback":
        return _move(state, obs, P.ROLLING_BACK, f"rollback by {_who(obs)}")
    if obs.fast_guard_tripped and state.phase in GUARDED:
        ignored = f" ({obs.action} by {obs.actor} ignored)" if obs.action else ""
        return _move(state, obs, P.ROLLING_BACK, f"fast guard: {obs.fast_guard_reason}{ignored}")
    if obs.action is not None:
        return _apply_action(spec, state, obs)
    return (
        _deadline(spec, state, obs)
        or _node_loss(spec, state, obs)
        or _HANDLERS[state.phase](spec, state, obs)
    )


def _reject(state: State, obs: Observation, why: str) -> Decision:
    """A decision that changes nothing and says why the action does not fit."""
    event = Event("rejected", f"{obs.action} by {obs.actor}: {why}", {"action": obs.action})
    return Decision(state, (), (event,), rejected=True)


def _apply_action(spec: Spec, state: State, obs: Observation) -> Decision:
    """Apply an approve, pause, resume or promote already known to fit the phase."""
    who = _who(obs)
    if obs.action == "approve":
        return _enter_step(spec, state, obs, state.step_index, f"approved by {who}", gate=False)
    if obs.action == "pause":
        return _move(state, obs, P.PAUSED, f"paused by {who}", paused_from=state.phase)
    if obs.action == "promote":
        if obs.frozen:
            return _reject(state, obs, obs.frozen)
        return _move(state, obs, P.PROMOTING, f"promoted by {who}", 100.0, paused_from=None)
    back = state.paused_from or P.PROGRESSING
    return _move(
        state,
        obs,
        back,
        f"resumed by {who}",
        paused_from=None,
        step_started_at=obs.now,
        inconclusive_checks=0,
    )


def _deadline(spec: Spec, state: State, obs: Observation) -> Decision | None:
    """Fail or roll back a release whose phase (or step) has not moved for the deadline."""
    if state.phase in WAITING_ON_HUMAN:
        return None
    since = state.phase_started_at
    if state.phase in JUDGED:
        since = max(since, state.step_started_at)
    if obs.now - since < spec.progress_deadline_s:
        return None
    stuck = f"no progress in {state.phase.value} for {obs.now - since:g} s"
    stuck += f" (deadline {spec.progress_deadline_s:g} s)"
    if state.phase in (P.PENDING, P.LOADING):
        return _move(state, obs, P.FAILED, f"{stuck}; no traffic was shifted, baseline kept")
    if state.phase is P.ROLLING_BACK:
        return _move(state, obs, P.FAILED, f"{stuck}; the rollback did not complete")
    held = f"; candidate had {_pct(state.candidate_weight)}, rolling back"
    return _move(state, obs, P.ROLLING_BACK, stuck + held)


HOLDING = "holding at "
NODE_LOSS_PHASES = frozenset({P.SHADOWING, P.PROGRESSING, P.WAITING_APPROVAL})


def _node_loss(spec: Spec, state: State, obs: Observation) -> Decision | None:
    """A node out of service while the candidate takes traffic: roll back, or hold the weight
    (verdicts of the hold are not counted) and resume once every node serves it again."""
    if state.phase not in NODE_LOSS_PHASES:
        return None
    at = _pct(state.candidate_weight)
    if not obs.nodes_out:
        if not state.reason.startswith(HOLDING):
            return None
        why = f"every node serves the candidate again; resuming at {at}"
        resumed = replace(state, reason=why)
        return _stay(resumed, obs, "next analysis interval", events=(Event("check", why),))
    names = ", ".join(obs.nodes_out)
    out = f"node(s) {names} not serving the candidate at {at}"
    if spec.on_node_loss == "rollback":
        return _move(state, obs, P.ROLLING_BACK, f"{out} (on_node_loss: rollback)")
    why = f"{HOLDING}{at}: {out}; resumes when every node serves it again"
    events = () if state.reason == why else (Event("check", why, {"nodes_out": names}),)
    held = replace(state, reason=why)
    if obs.verdict_at is not None and obs.verdict_at > (held.checked_until or 0.0):
        held = replace(held, checked_until=obs.verdict_at)  # an interval of the hold: not counted
    return _stay(held, obs, "every node serving the candidate", events=events)


def _pending(spec: Spec, state: State, obs: Observation) -> Decision:
    """Pin unversioned traffic to the baseline, then load baseline and candidate."""
    why = "router pins traffic to the baseline, then baseline+candidate load"
    return _move(state, obs, P.LOADING, why)


def _loading(spec: Spec, state: State, obs: Observation) -> Decision:
    """Start the first step once the candidate is READY everywhere and the pin is applied."""
    if obs.load_failed:
        return _move(state, obs, P.FAILED, f"candidate failed to load: {obs.load_error}")
    if not obs.candidate_ready:
        return _stay(state, obs, "candidate loading on every node")
    if not _same(obs.router_applied_weight, 0.0):
        return _stay(state, obs, "router pinning unversioned traffic to the baseline")
    if spec.shadow_s > 0:
        why = f"candidate READY on every node; shadow for {spec.shadow_s:g} s"
        return _move(state, obs, P.SHADOWING, why, 0.0, step_started_at=obs.now)
    return _enter_step(spec, state, obs, 0, "candidate READY on every node")


def _shadowing(spec: Spec, state: State, obs: Observation) -> Decision:
    """Judge the candidate on mirrored requests (clients get the baseline's answers); after
    `shadow_s` of passing intervals, the first real step."""
    if not (_same(obs.router_applied_weight, 0.0) and obs.router_mirroring):
        return _stay(state, obs, "router mirroring requests to the candidate")
    due = state.step_started_at + spec.shadow_s
    if not _is_new_verdict(state, obs):
        return _stay(state, obs, "next analysis interval", until=due)
    state = replace(state, checked_until=obs.verdict_at)
    if obs.verdict == "pass":
        if obs.now < due:
            check = _check(state, obs, "shadow: pass, mirroring until the shadow ends")
            return _stay(state, obs, "shadow period", until=due, events=(check,))
        return _enter_step(spec, state, obs, 0, f"shadow passed: {obs.verdict_reason}")
    return _counted(spec, state, obs, "shadow")


def _progressing(spec: Spec, state: State, obs: Observation) -> Decision:
    """Count each new interval's verdict: pass advances, fail counts, inconclusive counts apart."""
    if not _same(obs.router_applied_weight, state.candidate_weight):
        return _stay(state, obs, f"router applying {_pct(state.candidate_weight)}")
    due = state.step_started_at + spec.step_interval_s
    if not _is_new_verdict(state, obs):
        return _stay(state, obs, "next analysis interval", until=due)
    state = replace(state, checked_until=obs.verdict_at)
    at = _pct(state.candidate_weight)
    if obs.verdict == "pass":
        if obs.now < due:
            check = _check(state, obs, f"{at}: pass, holding until the step interval ends")
            return _stay(state, obs, "step interval", until=due, events=(check,))
        if state.step_index + 1 < len(spec.steps):
            return _enter_step(spec, state, obs, state.step_index + 1, obs.verdict_reason)
        if obs.frozen:
            return _frozen(state, obs, "100%")
        return _move(state, obs, P.PROMOTING, f"{at} passed: {obs.verdict_reason}", 100.0)
    return _counted(spec, state, obs, at)


def _counted(spec: Spec, state: State, obs: Observation, at: str) -> Decision:
    """A failed or inconclusive verdict counted at `at` (a weight, or "shadow"): roll back at
    max_failed_checks; pause or roll back at max_inconclusive_checks."""
    if obs.verdict == "fail":
        n = state.failed_checks + 1
        state = replace(state, failed_checks=n)
        count = f"{n}/{spec.max_failed_checks} failed checks at {at}: {obs.verdict_reason}"
        if n >= spec.max_failed_checks:
            return _move(state, obs, P.ROLLING_BACK, count)
        return _stay(state, obs, "next analysis interval", events=(_check(state, obs, count),))
    state = replace(state, inconclusive_checks=state.inconclusive_checks + 1)
    n, limit = state.inconclusive_checks, spec.max_inconclusive_checks
    text = f"{at}: inconclusive ({n} so far): {obs.verdict_reason}"
    if n < limit:
        return _stay(state, obs, "next analysis interval", events=(_check(state, obs, text),))
    why = f"{n}/{limit} inconclusive checks at {at} ({obs.verdict_reason}): too little traffic"
    if spec.on_inconclusive == "rollback":
        return _move(state, obs, P.ROLLING_BACK, f"{why}; rolling back")
    why += "; paused: resume, promote or roll back"
    return _move(state, obs, P.PAUSED, why, paused_from=state.phase)


def _waiting_approval(spec: Spec, state: State, obs: Observation) -> Decision:
    """Hold the current weight until a human approves the gated step."""
    gated = _pct(spec.steps[state.step_index].weight)
    return _stay(state, obs, f"approval to go to {gated}")


def _paused(spec: Spec, state: State, obs: Observation) -> Decision:
    """Hold the current weight until a human resumes, promotes or rolls back."""
    return _stay(state, obs, "paused: resume, promote or roll back")


def _promoting(spec: Spec, state: State, obs: Observation) -> Decision:
    """Send everything to the candidate; drain once the router serves it 100%."""
    if not _same(obs.router_applied_weight, 100.0):
        return _stay(state, obs, "router applying 100%")
    return _move(state, obs, P.DRAINING, "router serves 100% to the candidate; draining")


def _draining(spec: Spec, state: State, obs: Observation) -> Decision:
    """After drain_s and once the baseline is idle, serve only the candidate and move the alias."""
    until = state.phase_started_at + spec.drain_s
    if obs.now < until:
        return _stay(state, obs, "drain period", until=until)
    if not obs.baseline_drained:
        return _stay(state, obs, "in-flight requests on the baseline")
    why = "baseline drained; serving only the candidate, alias production moved"
    return _move(state, obs, P.SUCCEEDED, why)


def _rolling_back(spec: Spec, state: State, obs: Observation) -> Decision:
    """Candidate to 0%; unload it once idle; done when it is gone (the baseline kept serving)."""
    if not _candidate_idle(obs):
        return _stay(state, obs, "router to 0% and in-flight candidate requests done")
    if not obs.candidate_unloaded:
        return _stay(state, obs, "candidate unloading")
    return _move(state, obs, P.ROLLED_BACK, "candidate at 0% and unloaded; baseline serving")


_HANDLERS = {
    P.PENDING: _pending,
    P.LOADING: _loading,
    P.SHADOWING: _shadowing,
    P.PROGRESSING: _progressing,
    P.WAITING_APPROVAL: _waiting_approval,
    P.PAUSED: _paused,
    P.PROMOTING: _promoting,
    P.DRAINING: _draining,
    P.ROLLING_BACK: _rolling_back,
}


def _enter_step(
    spec: Spec, state: State, obs: Observation, index: int, why: str, *, gate: bool = True
) -> Decision:
    """Go to step `index`, or wait for approval first when that step has a manual gate; on a
    frozen cluster, hold (loading) or pause at this gate instead."""
    step, was = spec.steps[index], _pct(state.candidate_weight)
    if obs.frozen:
        return _frozen(state, obs, _pct(step.weight))
    if gate and step.manual_gate:
        text = f"{was}, awaiting approval for {_pct(step.weight)}: {why}"
        return _move(state, obs, P.WAITING_APPROVAL, text, step_index=index)
    text = f"{was} → {_pct(step.weight)}: {why}"
    changes = {"step_index": index, "step_started_at": obs.now}
    return _move(state, obs, P.PROGRESSING, text, step.weight, **changes)


def _frozen(state: State, obs: Observation, to: str) -> Decision:
    """Not into `to` while the cluster is frozen: a loading release holds at 0%, a running one
    pauses at its gate (resume once the freeze ends or an override is in force)."""
    if state.phase in (P.PENDING, P.LOADING):
        return _stay(state, obs, obs.frozen)
    text = (
        f"{_pct(state.candidate_weight)}, not going to {to}: {obs.frozen}; paused at this gate: "
        "resume once it ends, or once a second release manager approves an override"
    )
    paused_from = state.paused_from if state.phase is P.PAUSED else state.phase
    return _move(state, obs, P.PAUSED, text, paused_from=paused_from)


def _move(
    state: State,
    obs: Observation,
    phase: Phase,
    why: str,
    weight: float | None = None,
    **changes: Any,
) -> Decision:
    """A decision entering `phase` (or the next step of it) with its desired effects."""
    if weight is not None:
        changes["candidate_weight"] = weight
    if phase != state.phase:
        changes["phase_started_at"] = obs.now
    if phase != state.phase:
        changes.setdefault("cause", _cause(state, phase, why))
    new = replace(state, phase=phase, reason=why, **changes)
    kind = "phase" if phase != state.phase else "step"
    data = {"from": state.phase.value, "to": phase.value, "weight": new.candidate_weight}
    data.update(step_index=new.step_index, actor=obs.actor if obs.action else "")
    message = why if kind == "step" else f"{state.phase.value} → {phase.value}: {why}"
    return Decision(new, _desired(new, obs), (Event(kind, message, data),))


def _cause(state: State, phase: Phase, why: str) -> str:
    """The release's cause after it enters `phase` for `why` (see State.cause)."""
    if phase is P.PROMOTING:
        return why
    if phase is P.ROLLING_BACK:
        return why if state.phase is not P.ROLLING_BACK else state.cause
    if phase is P.FAILED:
        return f"{state.cause}; then {why}" if state.phase is P.ROLLING_BACK else why
    return state.cause


def _stay(
    state: State,
    obs: Observation,
    waiting_for: str,
    *,
    until: float | None = None,
    events: tuple[Event, ...] = (),
) -> Decision:
    """A decision that keeps the phase, re-asserts its desired state and says what it awaits."""
    return Decision(state, (*_desired(state, obs), Wait(waiting_for, until)), events)


def _desired(state: State, obs: Observation) -> tuple[Effect, ...]:
    """Desired loads and weights of a phase, in the order they must be applied."""
    p, w = state.phase, state.candidate_weight
    if p is P.PENDING:
        return ()
    if p is P.LOADING:  # pin before loading: Triton sends unversioned requests to the newest
        return (SetWeights(0.0), BOTH)
    if p is P.SHADOWING or (p is P.PAUSED and state.paused_from is P.SHADOWING):
        return (SetWeights(0.0, mirror=True), BOTH)
    if p in (P.PROGRESSING, P.WAITING_APPROVAL, P.PAUSED):
        return (SetWeights(w), BOTH)
    if p in (P.PROMOTING, P.DRAINING):
        return (SetWeights(100.0), BOTH)
    if p is P.SUCCEEDED:
        return (SetWeights(100.0), LoadServingSet("candidate"), MoveAlias("production"))
    if p is P.ROLLING_BACK and not _candidate_idle(obs):
        return (SetWeights(0.0),)
    return (SetWeights(0.0), LoadServingSet("baseline"), UnloadCandidate())


def _candidate_idle(obs: Observation) -> bool:
    """The router sends nothing to the candidate and its in-flight requests are done."""
    return _same(obs.router_applied_weight, 0.0) and obs.in_flight_done


def _is_new_verdict(state: State, obs: Observation) -> bool:
    """A verdict of an interval of the current step that has not been counted yet."""
    if obs.verdict is None or obs.verdict_at is None or obs.verdict_at <= state.step_started_at:
        return False
    return state.checked_until is None or obs.verdict_at > state.checked_until


def _check(state: State, obs: Observation, text: str) -> Event:
    """The event recording one analysis interval's verdict."""
    data = {"result": obs.verdict, "weight": state.candidate_weight, "at": obs.verdict_at}
    data.update(failed=state.failed_checks, inconclusive=state.inconclusive_checks)
    return Event("check", text, data)


def _same(applied: float | None, wanted: float) -> bool:
    return applied is not None and math.isclose(applied, wanted, abs_tol=1e-6)


def _who(obs: Observation) -> str:
    return f"{obs.actor}: {obs.action_reason}" if obs.action_reason else obs.actor


def _pct(weight: float) -> str:
    return f"{weight:g}%"
