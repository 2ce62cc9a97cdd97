"""A release plan's policy as a pure function: phases, allowed transitions and `decide`.

A plan walks one candidate version through waves of clusters: wave N+1 starts only once
every release of wave N succeeded and then baked for the wave's `bake_s` (the barrier). A
wave may need an approval first. No ORM, network or clock: the plan's tick observes the
releases of the current wave and the plan's approvals, passes the time in, and applies the
returned effects; every effect is desired state ("the releases of this plan should be
paused"), so applying a decision twice is harmless.

Transitions (docs/RELEASE_PLANS.md keeps this table; tests/unit/test_plan_state_machine.py
checks the two agree):

| from | to |
|---|---|
| PENDING | WAITING_APPROVAL, RUNNING, HALTED, ROLLING_BACK |
| WAITING_APPROVAL | RUNNING, HALTED, ROLLING_BACK, REFUSED |
| RUNNING | BAKING, HALTED, ROLLING_BACK |
| BAKING | WAITING_APPROVAL, RUNNING, SUCCEEDED, HALTED, ROLLING_BACK |
| HALTED | WAITING_APPROVAL, RUNNING, BAKING, ROLLING_BACK |
| ROLLING_BACK | ROLLED_BACK |
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Phase(str, Enum):  # noqa: UP042 - values equal names, stored as text
    PENDING = "PENDING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    RUNNING = "RUNNING"
    BAKING = "BAKING"
    HALTED = "HALTED"
    SUCCEEDED = "SUCCEEDED"
    REFUSED = "REFUSED"
    ROLLING_BACK = "ROLLING_BACK"
    ROLLED_BACK = "ROLLED_BACK"


P = Phase
TERMINAL: frozenset[Phase] = frozenset({P.SUCCEEDED, P.REFUSED, P.ROLLED_BACK})

TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    P.PENDING: frozenset({P.WAITING_APPROVAL, P.RUNNING, P.HALTED, P.ROLLING_BACK}),
    P.WAITING_APPROVAL: frozenset({P.RUNNING, P.HALTED, P.ROLLING_BACK, P.REFUSED}),
    P.RUNNING: frozenset({P.BAKING, P.HALTED, P.ROLLING_BACK}),
    P.BAKING: frozenset({P.WAITING_APPROVAL, P.RUNNING, P.SUCCEEDED, P.HALTED, P.ROLLING_BACK}),
    P.HALTED: frozenset({P.WAITING_APPROVAL, P.RUNNING, P.BAKING, P.ROLLING_BACK}),
    P.ROLLING_BACK: frozenset({P.ROLLED_BACK}),
    P.SUCCEEDED: frozenset(),
    P.REFUSED: frozenset(),
    P.ROLLED_BACK: frozenset(),
}

# The plan actions a person takes, and the phases that accept each (else 409).
ACTIONS: dict[str, frozenset[Phase]] = {
    "approve": frozenset({P.WAITING_APPROVAL}),
    "refuse": frozenset({P.WAITING_APPROVAL}),
    "halt": frozenset({P.PENDING, P.WAITING_APPROVAL, P.RUNNING, P.BAKING}),
    "resume": frozenset({P.HALTED}),
    "rollback": frozenset(set(Phase) - TERMINAL - {P.ROLLING_BACK}),
}
# What a release of the plan may fail on: a plan's failure policy.
ON_FAILURE = ("halt", "rollback")

# Release phases, as the releases app names them (text: this module imports no app).
RELEASE_SUCCEEDED = "SUCCEEDED"
RELEASE_FAILED = frozenset({"ROLLED_BACK", "FAILED"})


def can_transition(a: Phase, b: Phase) -> bool:
    return b in TRANSITIONS[a]


@dataclass(frozen=True)
class Wave:
    clusters: tuple[str, ...]
    bake_s: float = 0.0
    approval: bool = False


@dataclass(frozen=True)
class State:
    phase: Phase
    wave_index: int
    waves: tuple[Wave, ...]
    on_failure: str = "halt"
    baked_from: float | None = None  # when every release of the wave had succeeded
    reason: str = ""  # why the plan is in its phase (kept while it is halted)


@dataclass(frozen=True)
class Observation:
    """What the tick saw. `releases`: each cluster of the current wave -> its release's phase,
    None while none was started; `start_errors`: clusters whose release could not be started
    (why); `approval`: the current wave's latest decision ("approved", "refused" or None);
    `action`: a person's pending halt/resume/rollback; `any_active`: a release of the plan, in
    any wave, has not ended; `held`: the plan's clusters where no release may start now
    (frozen, out of reach)."""

    now: float
    releases: dict[str, str | None] = field(default_factory=dict)
    start_errors: dict[str, str] = field(default_factory=dict)
    approval: str | None = None
    action: str | None = None
    any_active: bool = False
    # Clusters of the plan where no release may start now -> why: frozen
    # (deployments/freezes.py) or out of reach (a node down). Their wave waits for them.
    held: dict[str, str] = field(default_factory=dict)


# ---- effects: desired state, applied by plans/tick.py in order


@dataclass(frozen=True)
class StartReleases:
    """Every cluster of the current wave without a release gets one."""

    clusters: tuple[str, ...]


@dataclass(frozen=True)
class PauseReleases:
    """Every running release of the plan is paused."""


@dataclass(frozen=True)
class ResumeReleases:
    """Every release of the plan paused by a halt runs on."""


@dataclass(frozen=True)
class RollbackReleases:
    """Every release of the plan that has not ended rolls back, and every cluster whose
    release already succeeded gets the baseline back (a release of its own): the fleet ends
    on one version."""


Effect = StartReleases | PauseReleases | ResumeReleases | RollbackReleases


@dataclass(frozen=True)
class Decision:
    phase: Phase
    wave_index: int
    baked_from: float | None
    reason: str = ""
    effects: tuple[Effect, ...] = ()
    event: str = ""  # what changed, in words ('' when nothing did)


def _stay(state: State, reason: str = "") -> Decision:
    return Decision(state.phase, state.wave_index, state.baked_from, reason)


def _enter_wave(state: State, obs: Observation, index: int, event: str) -> Decision:
    """The wave at `index` begins: an approval first where it needs one, else its releases."""
    wave = state.waves[index]
    if wave.approval and obs.approval != "approved":
        return Decision(
            P.WAITING_APPROVAL, index, None, f"wave {index + 1} waits for approval",
            event=event or f"wave {index + 1} waits for approval",
        )  # fmt: skip
    missing, held = _startable(wave, obs), _held_reason(wave, obs)
    started = f"wave {index + 1} started on {', '.join(missing) or 'no cluster yet'}"
    return Decision(
        P.RUNNING, index, None, held, (StartReleases(missing),) if missing else (),
        event or started + (f"; {held}" if held else ""),
    )  # fmt: skip


def _startable(wave: Wave, obs: Observation) -> tuple[str, ...]:
    """The wave's clusters without a release that are not held now."""
    return tuple(c for c in wave.clusters if obs.releases.get(c) is None and c not in obs.held)


def _held_reason(wave: Wave, obs: Observation) -> str:
    """Why some of the wave's clusters wait ('' when none does)."""
    held = [obs.held[c] for c in wave.clusters if obs.releases.get(c) is None and c in obs.held]
    return "waits: " + "; ".join(held) if held else ""


def _failed(state: State, obs: Observation) -> list[str]:
    """'cluster: why' of each release of the current wave that failed or could not start."""
    out = [f"{c}: could not start ({why})" for c, why in sorted(obs.start_errors.items())]
    out += [f"{c}: {p.lower()}" for c, p in sorted(obs.releases.items()) if p in RELEASE_FAILED]
    return out


def _on_failure(state: State, failed: list[str]) -> Decision:
    what = f"wave {state.wave_index + 1}: " + "; ".join(failed)
    if state.on_failure == "rollback":
        return Decision(
            P.ROLLING_BACK, state.wave_index, state.baked_from,
            f"{what}; rolling back every cluster of the plan to the baseline",
            (RollbackReleases(),),
            f"{what}: every release of the plan rolls back, and the clusters it was promoted on "
            "get the baseline back",
        )  # fmt: skip
    return Decision(
        P.HALTED, state.wave_index, state.baked_from, f"{what}; no further release starts",
        (PauseReleases(),), f"{what}: the plan halted",
    )  # fmt: skip


def _action(state: State, obs: Observation) -> Decision | None:
    action = obs.action
    if action == "rollback" and state.phase in ACTIONS["rollback"]:
        return Decision(
            P.ROLLING_BACK, state.wave_index, state.baked_from, "rolled back by hand",
            (RollbackReleases(),),
            "rollback asked: every release of the plan rolls back, and the clusters it was "
            "promoted on get the baseline back",
        )  # fmt: skip
    if action == "halt" and state.phase in ACTIONS["halt"]:
        return Decision(
            P.HALTED, state.wave_index, state.baked_from, "halted by hand",
            (PauseReleases(),), "halted: every running release of the plan paused",
        )  # fmt: skip
    if action == "resume" and state.phase is P.HALTED:
        started = any(p is not None for p in obs.releases.values())
        if not started:
            return _enter_wave(state, obs, state.wave_index, "resumed")
        return Decision(
            P.RUNNING, state.wave_index, state.baked_from, "", (ResumeReleases(),), "resumed"
        )
    return None


def decide(state: State, obs: Observation) -> Decision:
    """The plan's next phase and what to do to get there."""
    if state.phase in TERMINAL:
        return _stay(state, "")
    by_hand = _action(state, obs)
    if by_hand is not None:
        return by_hand
    phase, wave = state.phase, state.waves[state.wave_index]
    if phase is P.PENDING:
        return _enter_wave(state, obs, state.wave_index, "")
    if phase is P.WAITING_APPROVAL:
        if obs.approval == "refused":
            return Decision(
                P.REFUSED, state.wave_index, None, f"wave {state.wave_index + 1} was refused",
                event=f"wave {state.wave_index + 1} refused: the plan ends here",
            )  # fmt: skip
        if obs.approval == "approved":
            return _enter_wave(
                state, obs, state.wave_index, f"wave {state.wave_index + 1} approved"
            )
        return _stay(state, f"wave {state.wave_index + 1} waits for approval")
    if phase is P.ROLLING_BACK:
        if obs.any_active:  # a release that could not roll back yet (loading) is asked again
            return Decision(P.ROLLING_BACK, state.wave_index, state.baked_from, state.reason,
                            (RollbackReleases(),))  # fmt: skip
        return Decision(P.ROLLED_BACK, state.wave_index, state.baked_from, "rolled back",
                        event="every release of the plan ended")  # fmt: skip
    if phase is P.HALTED:  # a release still loading when the plan halted is paused once it runs
        return Decision(P.HALTED, state.wave_index, state.baked_from, state.reason or "halted",
                        (PauseReleases(),))  # fmt: skip
    failed = _failed(state, obs)
    if failed:
        return _on_failure(state, failed)
    if phase is P.RUNNING:
        missing, held = _startable(wave, obs), _held_reason(wave, obs)
        if missing:
            return Decision(P.RUNNING, state.wave_index, None, held, (StartReleases(missing),))
        if held:
            return _stay(state, held)
        if all(obs.releases.get(c) == RELEASE_SUCCEEDED for c in wave.clusters):
            return Decision(
                P.BAKING, state.wave_index, obs.now, f"wave {state.wave_index + 1} bakes",
                event=f"wave {state.wave_index + 1} succeeded; baking {wave.bake_s:g} s",
            )  # fmt: skip
        return _stay(state, "")
    # BAKING
    baked_from = state.baked_from if state.baked_from is not None else obs.now
    if obs.now - baked_from < wave.bake_s:
        return Decision(
            P.BAKING, state.wave_index, baked_from, f"wave {state.wave_index + 1} bakes"
        )
    if state.wave_index + 1 >= len(state.waves):
        return Decision(P.SUCCEEDED, state.wave_index, baked_from, "every wave succeeded",
                        event="every wave succeeded and baked")  # fmt: skip
    return _enter_wave(state, obs_for_next_wave(obs), state.wave_index + 1, "")


def obs_for_next_wave(obs: Observation) -> Observation:
    """The next wave starts with nothing observed of it (its approval is asked afresh)."""
    return Observation(now=obs.now, any_active=obs.any_active, held=obs.held)


def state_reason(state: State, text: str) -> str:
    return f"wave {state.wave_index + 1}: {text}"
