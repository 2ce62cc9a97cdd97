"""Release writes: create, human actions, and the tick that drives the state machine.

The tick (level-triggered, STYLE.md): take the release's advisory lock, observe (outside any
transaction), `decide`, re-apply the desired effects (router weights, serving set, alias),
then save the new state with a guarded update and append events in one transaction.
A crashed worker loses nothing: the next tick observes and re-applies.
"""

import copy
import logging
import time

from django.db import transaction
from django.utils import timezone

from audit.services import audit_record
from benchmarks.services import BenchmarkGateError, benchmark_gate_check
from deployments.locks import advisory_lock
from deployments.services import (
    DeploymentError,
    refuse_if_busy,
    serving_owner_set,
    serving_versions,
)
from models_registry.models import Model
from releases import effects, events, guard_log, observe
from releases.analysis import SLA, analyze, fast_guard, statistical_judge
from releases.inputs import (
    ReleaseInputError,
    check_spec_numbers,
    check_sticky_header,
    parse_analysis,
    parse_steps,
)
from releases.models import Release, ReleaseEvent
from releases.routing import access_log_path, router_driver_name
from releases.state_machine import ACTIONS, GUARDED, TERMINAL, Observation, Phase, State, decide

LOCK_NAMESPACE = 7302

log = logging.getLogger(__name__)


class ReleaseError(Exception):
    """Refused for a reason the user can fix; `status` is the HTTP code (400 or 409)."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.field, self.status = message, field, status


def _checked_inputs(
    *, strategy, steps, manual_gates, step_interval_s, progress_deadline_s, analysis, sticky
) -> list[dict]:
    """The stored steps, once every release setting is within its rules (ReleaseError)."""
    try:
        if strategy not in ("canary", "blue_green"):
            raise ReleaseInputError("Use canary or blue_green.", "strategy")
        check_spec_numbers(step_interval_s, progress_deadline_s)
        parse_analysis(analysis)
        check_sticky_header(sticky)
        return parse_steps(strategy, steps or [5, 25, 50, 100], manual_gates or [])
    except ReleaseInputError as exc:
        raise ReleaseError(exc.message, field=exc.field) from None


def _refuse_if_active(cluster, model, *, lock: bool = False) -> None:
    """409 naming the model's active release on `cluster`, whatever its phase."""
    active = Release.objects.filter(cluster=cluster, model=model).exclude(
        phase__in=[p.value for p in TERMINAL]
    )
    found = (active.select_for_update() if lock else active).first()
    if found is not None:
        raise ReleaseError(
            f"{model.name} already has an active release on {cluster.name}: "
            f"release {found.pk}, {found.phase.lower()}.",
            status=409,
        )


def release_create(
    *,
    cluster,
    candidate,
    actor,
    strategy: str = "canary",
    steps: list[float] | None = None,
    step_interval_s: float = 30.0,
    analysis: dict | None = None,
    manual_gates: list[float] | None = None,
    sticky_header: str = "",
    progress_deadline_s: float = 600.0,
    drain_s: float = 2.0,
    require_benchmark: bool | None = None,
    dry_run: bool = False,
) -> Release:
    """Record a release of `candidate` against what serves now; validated; audited.

    `dry_run`: every check runs (the locked ones included), then the unsaved release is
    returned: nothing is written, audited or started.
    """
    spec_steps = _checked_inputs(
        strategy=strategy,
        steps=steps,
        manual_gates=manual_gates,
        step_interval_s=step_interval_s,
        progress_deadline_s=progress_deadline_s,
        analysis=analysis,
        sticky=sticky_header,
    )
    model = candidate.model
    baseline = _baseline_for(cluster, candidate, strategy=strategy)
    required = cluster.require_benchmark if require_benchmark is None else require_benchmark
    try:
        benchmark_gate_check(version=candidate, required=required)
    except BenchmarkGateError as exc:
        raise ReleaseError(str(exc) + ".", field="candidate_version") from None
    release = Release(
        cluster=cluster,
        model=model,
        baseline=baseline,
        candidate=candidate,
        strategy=strategy,
        steps=spec_steps,
        step_interval_s=step_interval_s,
        analysis=analysis or {},
        sticky_header=sticky_header,
        progress_deadline_s=progress_deadline_s,
        drain_s=drain_s,
        created_by=actor,
    )
    try:
        release.spec()
    except (ValueError, TypeError) as exc:
        raise ReleaseError(str(exc), field="steps") from None
    _record(release, actor=actor, dry_run=dry_run)
    return release


def _record(release: Release, *, actor, dry_run: bool) -> None:
    """Under the model's lock: record its SLA on the release, check again that nothing else
    owns the model's serving state, and start the release unless this is a dry run."""
    cluster, model = release.cluster, release.model
    with transaction.atomic():
        # Locked like model_update and alias_set do: the SLA recorded here is the one in force.
        release.sla = Model.objects.select_for_update().get(pk=model.pk).sla
        _refuse_if_active(cluster, model, lock=True)
        try:
            refuse_if_busy(cluster, model)
        except DeploymentError as exc:
            raise ReleaseError(exc.message, status=409) from None
        if not dry_run:
            _start(release, actor=actor)


def _baseline_for(cluster, candidate, *, strategy: str):
    """The one version `candidate`'s model serves on `cluster`, checked to be releasable."""
    model = candidate.model
    _refuse_if_active(cluster, model)  # first: while one runs, the serving set is in flux
    current = serving_versions(cluster=cluster, model=model)
    if len(current) != 1:
        raise ReleaseError(
            f"{model.name} must serve exactly one version on {cluster.name} "
            f"to release against (it serves {len(current)}); deploy one first.",
            field="candidate_version",
        )
    if current[0].pk == candidate.pk:
        raise ReleaseError(
            f"v{candidate.version} already serves on {cluster.name}.", field="candidate_version"
        )
    if strategy == "canary" and router_driver_name(cluster) == "none":
        raise ReleaseError(
            f"Cluster {cluster.name} has no router: a weighted canary needs one; "
            "use strategy blue_green.",
            field="strategy",
        )
    return current[0]


def _start(release: Release, *, actor) -> None:
    """Inside the caller's transaction: save the release in its first phase, take the serving
    state, record the event and audit row, and queue the first tick after commit."""
    state = State.start(time.time())
    for key, value in release.state_fields(state).items():
        setattr(release, key, value)
    release.save()
    serving_owner_set(cluster=release.cluster, model=release.model, owner=f"release:{release.pk}")
    who = actor.get_username() if actor else ""
    ReleaseEvent.objects.create(
        release=release,
        kind="phase",
        phase=release.phase,
        actor=who,
        message=f"{who or 'system'} started {release}",
    )
    audit_record(
        actor=actor,
        action="release.created",
        obj=release,
        details={"steps": release.steps, "strategy": release.strategy},
    )
    transaction.on_commit(lambda: events.queue_tick(release.pk))


def release_action(*, release: Release, action: str, actor, reason: str = "") -> Release:
    """Queue a human action for the next tick; 409 when the phase does not allow it."""
    if action not in ACTIONS:
        raise ReleaseError(f"Unknown action '{action}'.", field="action")
    with transaction.atomic():
        locked = Release.objects.select_for_update().get(pk=release.pk)
        phase = Phase(locked.phase)
        if phase not in ACTIONS[action] or locked.pending_action:
            why = (
                "another action is waiting"
                if locked.pending_action
                else f"the release is {phase.value}"
            )
            raise ReleaseError(f"Cannot {action}: {why}.", status=409)
        locked.pending_action = {"action": action, "actor": actor.get_username(), "reason": reason}
        locked.save(update_fields=["pending_action", "updated_at"])
        ReleaseEvent.objects.create(
            release=locked,
            kind="action",
            phase=locked.phase,
            actor=actor.get_username(),
            message=f"{actor.get_username()} asked to {action}" + (f": {reason}" if reason else ""),
        )
        audit_record(
            actor=actor, action=f"release.{action}", obj=locked, details={"reason": reason}
        )
        transaction.on_commit(lambda: events.queue_tick(locked.pk))
    return locked


def _sla(release: Release) -> SLA:
    # Recorded at creation, so a loosened live SLA cannot pass the gates (a row made
    # without release_create has none: the model's then).
    sla = release.sla or release.model.sla
    return SLA(
        p99_latency_ms=sla["p99_latency_ms"],
        min_success_rate=sla["min_success_rate"],
        max_queue_ms=sla["max_queue_ms"],
    )


def _analysis(release: Release, views, obs: dict, now: float) -> None:
    """Fill obs with the interval verdict (when one is due) and the fast guard."""
    spec, phase = release.spec(), Phase(release.phase)
    marker = [release.step_index, release.candidate_weight]
    interval = release.interval or {}
    if interval.get("marker") != marker or not interval.get("start"):
        release.interval = {
            "marker": marker,
            "start": observe.counters_now(views, access_log_path(release.cluster)),
        }
        return
    metrics = observe.interval_metrics(release, views, interval["start"])
    release.interval = {**interval, "start": observe.restarts_rebased(interval["start"], views)}
    if phase in GUARDED:
        knobs = release.analysis_settings()  # defaults and ranges: releases/inputs.py
        guard = fast_guard(
            metrics["candidate"],
            _sla(release),
            min_requests=knobs.fast_guard_min_requests,
            error_rate_floor=knobs.fast_guard_error_floor,
            z=knobs.fast_guard_z,
        )
        obs.update(fast_guard_tripped=guard.tripped, fast_guard_reason=guard.reason)
        release.guard_samples = guard_log.guard_record(release, guard, at=now)
    if phase == Phase.PROGRESSING and now - interval["start"]["at"] >= release.analysis_interval_s:
        verdict = analyze(
            metrics["candidate"],
            metrics["baseline"],
            _sla(release),
            min_requests=spec.min_requests,
            latency_tolerance=spec.latency_tolerance,
            latency_margin_ms=release.analysis_settings().latency_margin_ms,
        )
        obs.update(verdict=verdict.result, verdict_reason=verdict.reason, verdict_at=now)
        release.last_analysis = events.analysis_payload(
            release, verdict, metrics, now, started=interval["start"]["at"]
        )
        release.last_analysis["judge"] = _judge(metrics)
        release.interval = {
            "marker": marker,
            "start": observe.counters_now(views, access_log_path(release.cluster)),
        }


def _judge(metrics: dict) -> dict:
    """The statistical judge's p-values for the record (the gates above decide)."""
    cand, base = metrics["candidate"], metrics["baseline"]
    (cand_n, cand_e), (base_n, base_e) = cand.worst_counts(), base.worst_counts()
    judgement = statistical_judge(
        metrics["latencies"]["candidate"],
        metrics["latencies"]["baseline"],
        cand_e,
        cand_n,
        base_e,
        base_n,
    )
    return {"latency_p_value": judgement.latency_p_value, "error_p_value": judgement.error_p_value}


def _observe(release: Release) -> Observation:
    now = time.time()
    views = observe.nodes_view(release.cluster, release.model.name, release.candidate.version)
    live = [v for v in views.values() if v.live]
    fields = {
        "candidate_ready": bool(live)
        and len(live) == len(views)
        and all(v.candidate_ready for v in live),
        "load_failed": bool(release.load_error),
        "load_error": release.load_error,
        "router_applied_weight": release.router_weight,
        "baseline_drained": observe.pending_requests(views, release.baseline.version) == 0,
        "in_flight_done": observe.pending_requests(views, release.candidate.version) == 0,
        "candidate_unloaded": bool(live) and not any(v.candidate_loaded for v in live),
    }
    if release.pending_action:
        fields.update(
            action=release.pending_action["action"],
            actor=release.pending_action.get("actor", ""),
            action_reason=release.pending_action.get("reason", ""),
        )
    _analysis(release, views, fields, now)
    return Observation(now=now, **fields)


def release_tick(*, release_id: int) -> Release | None:
    """One observe-decide-apply pass; returns the release, or None when another tick holds it
    (or the release no longer exists: a queued tick may outlive it)."""
    with advisory_lock(LOCK_NAMESPACE, release_id) as taken:
        if not taken:
            return None
        release = (
            Release.objects.select_related(
                "cluster", "model", "baseline__model", "candidate__model"
            )
            .filter(pk=release_id)
            .first()
        )
        if release is None:
            log.warning("release %s is gone: nothing to tick", release_id)
            return None
        if not release.is_active:
            return release
        try:
            release.spec()
        except ReleaseInputError as exc:
            log.error("release %s not ticked: its stored %s", release_id, exc)
            return release
        stored = copy.deepcopy({name: getattr(release, name) for name in _TICK_WRITES})
        obs = _observe(release)
        decision = decide(release.spec(), release.state(), obs)
        applied = effects.apply_all(release, decision) if not decision.rejected else []
        return _save(release, decision, obs, applied, stored)


# What the cockpit shows of a release's row (events aside).
VISIBLE = (
    "phase",
    "step_index",
    "candidate_weight",
    "failed_checks",
    "inconclusive_checks",
    "reason",
)


def _visible(values: dict) -> tuple:
    return tuple(values.get(name) for name in VISIBLE)


# The columns a tick writes: the state machine's (Release.state_fields) and its own.
_TICK_WRITES = (
    "phase",
    "step_index",
    "candidate_weight",
    "failed_checks",
    "inconclusive_checks",
    "step_started_at",
    "phase_started_at",
    "paused_from",
    "reason",
    "checked_until",
    "interval",
    "last_analysis",
    "router_weight",
    "applied_serving",
    "load_error",
)


def _save(
    release: Release, decision, obs: Observation, applied: list[ReleaseEvent], stored: dict
) -> Release:
    fields = release.state_fields(decision.state)
    fields.update({name: getattr(release, name) for name in _TICK_WRITES if name not in fields})
    quiet = not (applied or decision.events or obs.action is not None or obs.verdict is not None)
    if quiet and all(fields[name] == value for name, value in stored.items()):
        return release  # nothing to write and nobody to tell
    fields.update(revision=release.revision + 1, updated_at=timezone.now())
    fields["guard_samples"] = release.guard_samples  # kept in the cache between writes
    if obs.action is not None:
        fields["pending_action"] = None
    finished = decision.state.phase in TERMINAL and release.phase not in {p.value for p in TERMINAL}
    if finished:
        fields["finished_at"] = timezone.now()
    with transaction.atomic():
        updated = Release.objects.filter(pk=release.pk, revision=release.revision).update(**fields)
        if not updated:
            return release  # someone else saved first; the next tick starts from theirs
        rows = [
            ReleaseEvent(
                release=release,
                kind=e.kind,
                phase=decision.state.phase.value,
                message=e.message,
                data=e.data,
                actor=obs.actor if e.kind in ("rejected", "phase") and obs.action else "",
            )
            for e in decision.events
        ] + applied
        if obs.verdict is not None:
            rows.insert(
                0,
                ReleaseEvent(
                    release=release,
                    kind="analysis",
                    data=release.last_analysis,
                    phase=release.phase,
                    message=f"{obs.verdict}: {obs.verdict_reason}",
                ),
            )
        ReleaseEvent.objects.bulk_create(rows)
        if finished:
            serving_owner_set(cluster=release.cluster, model=release.model, owner="")
        if rows or _visible(fields) != _visible(release.__dict__) or obs.action is not None:
            # Watchers refetch the cockpit on each message: only for what they can see.
            transaction.on_commit(lambda: events.publish(release.pk))
    for name, value in fields.items():  # the row as just written, without reading it back
        setattr(release, name, value)
    return release
