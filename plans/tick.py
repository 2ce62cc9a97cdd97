"""One tick of a release plan: observe its releases and approvals, `decide`, apply, save.

Level-triggered and safe to run twice: the plan row is locked for the tick (a tick that finds
it locked does nothing), every effect is desired state, and a release is started only for a
cell that has none and no start error."""

from __future__ import annotations

import logging
import time

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accounts.errors import ApplicationError
from audit.services import audit_record
from deployments.freezes import cluster_frozen
from deployments.models import TritonNode
from health.services import plan_halted_alert, plan_halted_resolve
from plans.approval_links import approval_url
from plans.models import PlanApproval, PlanRelease, ReleasePlan
from plans.services import plan_event
from plans.state_machine import (
    TERMINAL,
    Decision,
    Observation,
    PauseReleases,
    Phase,
    ResumeReleases,
    RollbackReleases,
    StartReleases,
    State,
    Wave,
    decide,
)
from releases.services import release_action, release_create
from releases.state_machine import ACTIONS as RELEASE_ACTIONS
from releases.state_machine import TERMINAL as RELEASE_TERMINAL
from releases.state_machine import Phase as ReleasePhase

log = logging.getLogger(__name__)


def state_of(plan: ReleasePlan) -> State:
    waves = tuple(
        Wave(tuple(w["clusters"]), float(w.get("bake_s") or 0), bool(w.get("approval")))
        for w in plan.waves
    )
    return State(
        Phase(plan.phase), plan.wave_index, waves, plan.on_failure, plan.baked_from, plan.reason
    )


def _observe(plan: ReleasePlan, cells: list[PlanRelease], now: float) -> Observation:
    current = [c for c in cells if c.wave == plan.wave_index]
    latest = (
        PlanApproval.objects.filter(plan=plan, wave=plan.wave_index)
        .order_by("-created_at", "-id")
        .values_list("decision", flat=True)
        .first()
    )
    ended = {p.value for p in RELEASE_TERMINAL}
    return Observation(
        now=now,
        releases={c.cluster.name: (c.release.phase if c.release else None) for c in current},
        start_errors={c.cluster.name: c.error for c in current if c.error and not c.release},
        approval=latest,
        action=(plan.pending_action or {}).get("action"),
        any_active=any(
            r is not None and r.phase not in ended for c in cells for r in (c.release, c.revert)
        ),
        held={c.cluster.name: why for c in cells if (why := _held(c.cluster))},
    )


def _held(cluster) -> str:
    """Why no release may start on `cluster` now ('' when one may): a freeze, or a node down
    (a release loads the candidate on every node; reconcile keeps each node's health)."""
    frozen = cluster_frozen(cluster.name)
    if frozen:
        return frozen
    nodes = list(cluster.nodes.all())
    down = [n for n in nodes if n.health == TritonNode.Health.DOWN]
    if not nodes:
        return f"{cluster.name} has no node"
    if down:
        errors = "; ".join(f"{n.name}: {n.last_error or 'down'}" for n in down)
        return f"{cluster.name} is out of reach ({errors})"
    return ""


def _actor(plan: ReleasePlan):
    """Who a plan's own effects act as: the person whose action is taken, else the author."""
    actor_id = (plan.pending_action or {}).get("actor_id") or plan.created_by_id
    return get_user_model().objects.filter(pk=actor_id).first()


def _start(plan: ReleasePlan, cells: list[PlanRelease], clusters: tuple[str, ...], actor) -> None:
    settings = plan.waves[plan.wave_index].get("release") or {}
    for cell in cells:
        if cell.wave != plan.wave_index or cell.cluster.name not in clusters:
            continue
        if cell.release_id or cell.error:
            continue
        try:
            if actor is None:
                raise ApplicationError("the plan's author no longer exists")
            with transaction.atomic():
                cell.release = release_create(
                    cluster=cell.cluster, candidate=plan.candidate, actor=actor, **settings
                )
            message = f"release {cell.release.pk} started on {cell.cluster.name}"
        except ApplicationError as exc:
            cell.error = exc.message
            message = f"no release on {cell.cluster.name}: {exc.message}"
        cell.save(update_fields=["release", "error"])
        plan_event(plan, kind="start", message=message)


# What a revert release takes from its wave's settings (a blue/green switch back: one step).
REVERT_SETTINGS = ("step_interval_s", "analysis", "progress_deadline_s", "drain_s")


def _revert(plan: ReleasePlan, cells: list[PlanRelease], actor) -> None:
    """Each cluster whose release of the plan succeeded gets that release's baseline back by a
    blue/green release of its own (gated like any release; never frozen, as a rollback)."""
    for cell in cells:
        release = cell.release
        if release is None or release.phase != "SUCCEEDED" or cell.revert_id or cell.revert_error:
            continue
        settings = plan.waves[cell.wave].get("release") or {}
        kept = {k: settings[k] for k in REVERT_SETTINGS if k in settings}
        try:
            if actor is None:
                raise ApplicationError("the plan's author no longer exists")
            with transaction.atomic():
                cell.revert = release_create(
                    cluster=cell.cluster, candidate=release.baseline, actor=actor,
                    strategy="blue_green", check_freeze=False, **kept,
                )  # fmt: skip
            message = (
                f"release {cell.revert.pk} brings v{release.baseline.version} back on "
                f"{cell.cluster.name}"
            )
        except ApplicationError as exc:
            cell.revert_error = exc.message
            where = f"v{release.baseline.version} not brought back on {cell.cluster.name}"
            message = f"{where}: {exc.message}"
        cell.save(update_fields=["revert", "revert_error"])
        plan_event(plan, kind="effect", message=message)


def _each_release(plan, cells, action: str, actor, reason: str) -> None:
    """`action` on every release of the plan whose phase takes it (desired state: one that
    does not, or has an action waiting, is left as it is)."""
    for cell in cells:
        release = cell.release
        if release is None or ReleasePhase(release.phase) not in RELEASE_ACTIONS[action]:
            continue
        if release.pending_action:
            continue
        try:
            release_action(release=release, action=action, actor=actor, reason=reason)
        except ApplicationError as exc:  # its phase moved meanwhile: the next tick sees it
            log.info("plan %s: %s of release %s refused: %s", plan.pk, action, release.pk, exc)
            continue
        plan_event(
            plan, kind="effect", message=f"{action} release {release.pk} ({cell.cluster.name})"
        )


def _apply(plan: ReleasePlan, cells: list[PlanRelease], decision: Decision) -> None:
    actor = _actor(plan)
    reason = f"release plan {plan.pk}: {decision.reason or decision.event}"
    for effect in decision.effects:
        if isinstance(effect, StartReleases):
            _start(plan, cells, effect.clusters, actor)
        elif isinstance(effect, PauseReleases):
            _each_release(plan, cells, "pause", actor, reason)
        elif isinstance(effect, ResumeReleases):
            _each_release(plan, cells, "resume", actor, reason)
        elif isinstance(effect, RollbackReleases):
            _each_release(plan, cells, "rollback", actor, reason)
            _revert(plan, cells, actor)


def _row(plan: ReleasePlan) -> tuple:
    """What a tick may change on the plan's row."""
    return (plan.phase, plan.wave_index, plan.baked_from, plan.reason, plan.pending_action,
            plan.finished_at)  # fmt: skip


def plan_tick(*, plan_id: int) -> ReleasePlan | None:
    """One tick; None when another tick holds the plan or it does not exist."""
    with transaction.atomic():
        plan = (
            ReleasePlan.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("candidate", "candidate__model", "created_by")
            .filter(pk=plan_id)
            .first()
        )
        if plan is None or Phase(plan.phase) in TERMINAL:
            return plan
        cells = list(
            PlanRelease.objects.filter(plan=plan)
            .select_related("cluster", "release", "release__baseline", "revert")
            .prefetch_related("cluster__nodes")
        )
        decision = decide(state_of(plan), _observe(plan, cells, time.time()))
        before, wave_before = plan.phase, plan.wave_index
        was = _row(plan)
        plan.phase, plan.wave_index = decision.phase.value, decision.wave_index
        plan.baked_from, plan.reason = decision.baked_from, decision.reason
        _apply(plan, cells, decision)
        plan.pending_action = None  # taken, or no longer fitting the phase: dropped either way
        if Phase(plan.phase) in TERMINAL:
            plan.finished_at = timezone.now()
        if _row(plan) != was:  # a quiet tick writes nothing, so its watchers hear nothing
            plan.save()
        if decision.event or plan.phase != before:
            plan_event(plan, kind="phase", message=decision.event or f"{before} -> {plan.phase}")
        if plan.phase != before or decision.wave_index != wave_before:
            _audit_transition(plan, before)
    return plan


def _audit_transition(plan: ReleasePlan, before: str) -> None:
    """The plan's own transitions that webhooks can be told of (notifications/catalog.py):
    a wave started, a wave waits for approval, the plan halted, the plan ended."""
    phase = Phase(plan.phase)
    if before == Phase.HALTED.value and phase is not Phase.HALTED:
        model, version = plan.candidate.model.name, plan.candidate.version
        plan_halted_resolve(
            model=model, version=version, reason=f"plan {plan.pk} is {plan.phase.lower()}"
        )
    if phase is Phase.RUNNING and before != Phase.HALTED.value:
        action = "plan.wave_started"
    elif phase is Phase.WAITING_APPROVAL:
        action = "plan.waiting_approval"
    elif phase is Phase.HALTED:
        action = "plan.halted"
    elif phase in TERMINAL:
        action = "plan.finished"
    else:
        return
    wave = plan.waves[plan.wave_index]
    details = {
        "model": plan.candidate.model.name,
        "candidate_version": plan.candidate.version,
        "wave": plan.wave_index + 1,
        "waves": len(plan.waves),
        "phase": plan.phase,
        "reason": plan.reason,
        "clusters": list(wave["clusters"]),
    }
    if phase is Phase.WAITING_APPROVAL:
        link = approval_url(plan_id=plan.pk, wave=plan.wave_index)
        if link:
            details["approve_url"] = link  # for the webhook message (notifications/catalog.py)
    audit_record(actor=None, action=action, obj=plan, details=details)
    model, version = details["model"], details["candidate_version"]
    if phase is Phase.HALTED:
        summary = (
            f"Plan {plan.pk} ({model} v{version}) halted at wave {details['wave']}: {plan.reason}"
        )
        plan_halted_alert(plan_id=plan.pk, model=model, version=version, summary=summary[:500])
