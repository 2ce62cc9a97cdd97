"""Release plans: start one, decide on a wave (four-eyes), halt, resume or roll back.

Every write is audited; an action is taken by the plan's next tick (plans/tick.py), queued at
once on the releases lane."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from accounts.errors import ApplicationError, Forbidden, NotFound, Refused
from audit.services import audit_record
from deployments.leases import BROKER_ERRORS
from deployments.models import TritonCluster
from plans.models import PlanApproval, PlanEvent, PlanRelease, ReleasePlan
from plans.state_machine import ACTIONS, ON_FAILURE, Phase
from releases.services import release_create

log = logging.getLogger(__name__)

MAX_WAVES, MAX_CLUSTERS_PER_WAVE, MAX_BAKE_S = 20, 50, 7 * 24 * 3600.0
# The release settings a wave may give, as release_create takes them.
RELEASE_SETTINGS = frozenset({
    "strategy", "steps", "step_interval_s", "analysis", "manual_gates", "sticky_header",
    "progress_deadline_s", "drain_s", "require_benchmark", "shadow_s", "shadow_share",
    "agreement",
})  # fmt: skip


class PlanError(ApplicationError):
    """A plan start or action refused (400, or 409 when it conflicts with the plan)."""


def queue_tick(plan_id: int) -> None:
    """Tick the plan now; with the broker out of reach, beat's every-second pass does it."""
    from plans.tasks import tick

    try:
        tick.delay(plan_id)
    except BROKER_ERRORS as exc:
        log.warning("tick of plan %s not queued, the beat queues one: %s", plan_id, exc)


def _checked_waves(waves: list[dict]) -> list[dict]:
    """The waves as stored ({"clusters", "release", "bake_s", "approval"}), or Refused naming
    the field at fault."""
    if not isinstance(waves, list) or not 1 <= len(waves) <= MAX_WAVES:
        raise Refused(f"A plan has 1 to {MAX_WAVES} waves.", field="waves")
    seen: dict[str, int] = {}
    out = []
    for i, wave in enumerate(waves):
        where = f"waves[{i}]"
        clusters = wave.get("clusters")
        if not isinstance(clusters, list) or not 1 <= len(clusters) <= MAX_CLUSTERS_PER_WAVE:
            raise Refused(f"A wave names 1 to {MAX_CLUSTERS_PER_WAVE} clusters.", field=where)
        for name in clusters:
            if name in seen:
                raise Refused(
                    f"Cluster {name} is in wave {seen[name] + 1} already: a plan releases to "
                    "each cluster once.",
                    field=f"{where}.clusters",
                )
            seen[name] = i
        unknown = sorted(set(clusters) - set(TritonCluster.objects.filter(name__in=clusters)
                                             .values_list("name", flat=True)))  # fmt: skip
        if unknown:
            raise Refused(f"No cluster named {', '.join(unknown)}.", field=f"{where}.clusters")
        release = dict(wave.get("release") or {})
        extra = sorted(set(release) - RELEASE_SETTINGS)
        if extra:
            raise Refused(
                f"Unknown release settings {', '.join(extra)} (one of "
                f"{', '.join(sorted(RELEASE_SETTINGS))}).",
                field=f"{where}.release",
            )
        bake_s = float(wave.get("bake_s") or 0.0)
        if not 0 <= bake_s <= MAX_BAKE_S:
            raise Refused(f"bake_s is 0 to {MAX_BAKE_S:g} s.", field=f"{where}.bake_s")
        approval = bool(wave.get("approval", False))
        out.append({"clusters": list(clusters), "release": release, "bake_s": bake_s,
                    "approval": approval})  # fmt: skip
    return out


def plan_create(*, candidate, waves: list[dict], actor, on_failure: str = "halt") -> ReleasePlan:
    """Record a plan of `candidate` over `waves` and start its first tick. Each wave's release
    is checked on each of its clusters now (a dry run: every check a release start makes), so
    a typo or a cluster that cannot take the candidate is refused before anything runs."""
    if on_failure not in ON_FAILURE:
        raise Refused(f"on_failure is one of {', '.join(ON_FAILURE)}.", field="on_failure")
    stored = _checked_waves(waves)
    clusters = {c.name: c for c in TritonCluster.objects.filter(
        name__in=[n for w in stored for n in w["clusters"]])}  # fmt: skip
    for i, wave in enumerate(stored):
        for name in wave["clusters"]:
            try:
                release_create(cluster=clusters[name], candidate=candidate, actor=actor,
                               dry_run=True, check_freeze=False, **wave["release"])  # fmt: skip
            except ApplicationError as exc:
                raise PlanError(
                    f"Wave {i + 1}, cluster {name}: {exc.message}",
                    field=f"waves[{i}]", status=exc.status,
                ) from None  # fmt: skip
    with transaction.atomic():
        plan = ReleasePlan.objects.create(
            model=candidate.model, candidate=candidate, waves=stored, on_failure=on_failure,
            created_by=actor,
        )  # fmt: skip
        PlanRelease.objects.bulk_create(
            PlanRelease(plan=plan, wave=i, cluster=clusters[name])
            for i, wave in enumerate(stored)
            for name in wave["clusters"]
        )
        summary = " -> ".join("[" + ", ".join(w["clusters"]) + "]" for w in stored)
        plan_event(plan, kind="phase", message=f"plan of v{candidate.version}: {summary}",
                   actor=actor.get_username())  # fmt: skip
        audit_record(actor=actor, action="plan.started", obj=plan,
                     details={"waves": stored, "on_failure": on_failure})  # fmt: skip
        transaction.on_commit(lambda: queue_tick(plan.pk))
    return plan


def plan_event(plan: ReleasePlan, *, kind: str, message: str, actor: str = "") -> PlanEvent:
    return PlanEvent.objects.create(
        plan=plan, kind=kind, phase=plan.phase, wave=plan.wave_index, message=message,
        actor=actor,
    )  # fmt: skip


def _may_approve(plan: ReleasePlan, actor) -> None:
    """Forbidden for the plan's author (four-eyes), a superuser included, unless
    SWITCHYARD_PLAN_SELF_APPROVAL allows it."""
    if plan.created_by_id == actor.pk and not settings.SWITCHYARD_PLAN_SELF_APPROVAL:
        raise Forbidden(
            "The plan's author cannot approve or refuse its waves: another release manager "
            "must (four-eyes; SWITCHYARD_PLAN_SELF_APPROVAL allows it).",
            field="action",
        )


def plan_action(
    *, plan: ReleasePlan, action: str, actor, comment: str = "", wave: int | None = None
) -> ReleasePlan:
    """approve/refuse the wave waiting for approval, or ask for halt/resume/rollback; 409
    when the plan's phase does not take it, or (`wave`, an index) when another wave waits."""
    if action not in ACTIONS:
        raise Refused(f"Unknown action '{action}'.", field="action")
    with transaction.atomic():
        locked = ReleasePlan.objects.select_for_update().filter(pk=plan.pk).first()
        if locked is None:
            raise NotFound(f"No release plan {plan.pk}.")
        phase = Phase(locked.phase)
        if phase not in ACTIONS[action]:
            raise PlanError(f"Cannot {action}: the plan is {phase.value}.", status=409)
        if wave is not None and wave != locked.wave_index:
            raise PlanError(f"Cannot {action} wave {wave + 1}: the plan is at wave "
                            f"{locked.wave_index + 1} now.", status=409)  # fmt: skip
        name = actor.get_username()
        if action in ("approve", "refuse"):
            _may_approve(locked, actor)
            decision = "approved" if action == "approve" else "refused"
            PlanApproval.objects.create(
                plan=locked, wave=locked.wave_index, decision=decision, actor=actor,
                actor_name=name, comment=comment,
            )  # fmt: skip
            message = f"{name} {decision} wave {locked.wave_index + 1}"
        else:
            if locked.pending_action:
                raise PlanError(f"Cannot {action}: another action is waiting.", status=409)
            locked.pending_action = {"action": action, "actor_id": actor.pk, "actor": name,
                                     "reason": comment}  # fmt: skip
            locked.save(update_fields=["pending_action", "updated_at"])
            message = f"{name} asked to {action}"
        plan_event(locked, kind="action", message=message + (f": {comment}" if comment else ""),
                   actor=name)  # fmt: skip
        audit_record(actor=actor, action=f"plan.{action}", obj=locked,
                     details={"wave": locked.wave_index + 1, "comment": comment})  # fmt: skip
        transaction.on_commit(lambda: queue_tick(locked.pk))
    return locked
