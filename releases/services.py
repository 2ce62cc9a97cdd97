"""Release writes: create a release and queue human actions (approve, pause, resume, roll
back, promote) for its next tick. The tick itself is releases/tick.py."""

import time

from django.conf import settings
from django.db import transaction

from accounts.errors import ApplicationError
from audit.services import audit_record
from benchmarks.services import BenchmarkGateError, benchmark_gate_check
from deployments.backends import backend_refusal
from deployments.freezes import cluster_frozen
from deployments.services import (
    DeploymentError,
    refuse_if_busy,
    serving_owner_set,
    serving_versions,
)
from deployments.temporary import sibling_name
from integrations.triton.memory import load_refusal
from models_registry.models import Model
from models_registry.sla import sla_warning
from releases import events
from releases.configs import candidate_name_for
from releases.graph import graph_callers, steps_to_load
from releases.inputs import (
    ReleaseInputError,
    agreement_stored,
    check_spec_numbers,
    check_sticky_header,
    effective_analysis,
    parse_analysis,
    parse_shadow,
    parse_steps,
)
from releases.models import Release, ReleaseEvent
from releases.routing import router_driver_name
from releases.selectors import routed_rate, unrouted_recent
from releases.state_machine import ACTIONS, TERMINAL, Phase, State
from releases.unrouted import exceeds, percent
from releases.warnings import TrafficPlan, traffic_warning
from telemetry.selectors import node_memory_recent


class ReleaseError(ApplicationError):
    """A release start or action refused (400, or 409 when it conflicts with the release)."""


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
    calling = (
        Release.objects.filter(cluster=cluster, callers__contains=[{"model": model.name}])
        .exclude(phase__in=[p.value for p in TERMINAL])
        .select_related("model")
        .first()
    )
    if calling is not None:
        raise ReleaseError(
            f"{model.name} calls {calling.model.name}, whose release {calling.pk} on "
            f"{cluster.name} ({calling.phase.lower()}) splits {model.name}'s traffic too: "
            "wait for it to end.",
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
    shadow_s: float = 0.0,
    shadow_share: float | None = None,
    agreement: dict | None = None,
    require_benchmark: bool | None = None,
    dry_run: bool = False,
    confirm_unrouted: bool = False,
    check_freeze: bool = True,
) -> Release:
    """Record a release of `candidate` against what serves now; validated; audited.
    `dry_run`: every check runs (the locked ones too), nothing is written or started. 409
    above `analysis.max_unrouted_share` unless `confirm_unrouted`, and on a frozen cluster
    unless `check_freeze=False` (a plan checks freezes per wave). `shadow_s` > 0: a shadow
    of `shadow_share` % (default 100) of the requests first, answers compared per `agreement`.
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
    shadow = _shadow_checked(cluster, shadow_s, shadow_share, progress_deadline_s, agreement)
    placed = _baseline_checked(cluster, candidate, strategy, require_benchmark)
    if check_freeze:
        _refuse_if_frozen(cluster)
    release = Release(
        cluster=cluster,
        model=candidate.model,
        candidate=candidate,
        strategy=strategy,
        steps=spec_steps,
        step_interval_s=step_interval_s,
        analysis=effective_analysis(analysis, step_interval_s=step_interval_s),
        sticky_header=sticky_header,
        **placed,
        **shadow,
        progress_deadline_s=progress_deadline_s,
        drain_s=drain_s,
        created_by=actor,
    )
    _spec_and_unrouted_checked(release, actor=actor, confirmed=confirm_unrouted)
    _record(release, actor=actor, dry_run=dry_run)
    return release


def _spec_and_unrouted_checked(release: Release, *, actor, confirmed: bool) -> None:
    """The settings together make a spec (400), and the unrouted share is within its limit
    or confirmed (409; recorded on the release)."""
    try:
        release.spec()
    except (ValueError, TypeError) as exc:
        raise ReleaseError(str(exc), field="steps") from None
    release.unrouted_at_start = _unrouted_check(release, actor=actor, confirmed=confirmed)


def _shadow_checked(cluster, shadow_s, shadow_share, progress_deadline_s, agreement) -> dict:
    """{shadow_s, shadow_share, agreement} of the shadow asked for: mirroring needs the
    router, and answers are compared only in a shadow."""
    try:
        seconds, share = parse_shadow(shadow_s, shadow_share, float(progress_deadline_s))
        stored = agreement_stored(agreement)
    except ReleaseInputError as exc:
        raise ReleaseError(exc.message, field=exc.field) from None
    if stored and not seconds:
        raise ReleaseError(
            "Answers are compared on a shadow's copies: give shadow_s too.", field="agreement"
        )
    if seconds and router_driver_name(cluster) != "nginx":
        raise ReleaseError(
            f"Cluster {cluster.name} has no router to mirror requests with: a shadow needs one.",
            field="shadow_s",
        )
    return {"shadow_s": seconds, "shadow_share": share, "agreement": stored}


def _refuse_if_frozen(cluster) -> None:
    frozen = cluster_frozen(cluster.name)
    if frozen:
        raise ReleaseError(
            f"{frozen}: nothing starts on a frozen cluster. A second release manager can "
            f"approve an override (POST /api/v1/clusters/{cluster.name}/freeze-overrides/).",
            field="cluster", status=409,
        )  # fmt: skip


def _start_warnings(release: Release) -> list[str]:
    """What could keep the release from being judged (releases/warnings.py): the model's
    SLA (as recorded), and its routed traffic against the first step's needs."""
    found = [sla_warning(release.sla, model=release.model.name)]
    weights = [float(s.get("weight", 0)) for s in release.steps or [] if s.get("weight")]
    measured = routed_rate(cluster=release.cluster, model=release.model.name)
    if measured is not None and weights:
        knobs = release.analysis_settings()
        plan = TrafficPlan(
            first_weight=weights[0],
            interval_s=release.analysis_interval_s,
            min_requests=knobs.min_requests,
            max_inconclusive_checks=knobs.max_inconclusive_checks,
            on_inconclusive=knobs.on_inconclusive,
        )
        routed, window_s = measured
        found.append(traffic_warning(plan, routed_requests=routed, window_s=window_s))
    return [text for text in found if text]


def _baseline_checked(cluster, candidate, strategy: str, require_benchmark: bool | None):
    """{baseline: what serves now, candidate_name: the name the candidate serves under,
    callers: the callers judged with it, step_loads: what it calls that is loaded for it}
    once the candidate may replace it: a config of its own only behind a router (400
    naming the fields), what it calls served or loadable and callers only where the
    router can split them (409), where required a passed benchmark, and room for it beside
    the baseline."""
    if reason := backend_refusal(cluster, [candidate]):
        raise ReleaseError(reason + ".", field="candidate_version")
    baseline = _baseline_for(cluster, candidate, strategy=strategy)
    routed = router_driver_name(cluster) != "none"
    candidate_name = candidate_name_for(baseline=baseline, candidate=candidate, routed=routed)
    step_loads = steps_to_load(cluster=cluster, candidate=candidate, routed=routed)
    callers = graph_callers(cluster=cluster, candidate=candidate, routed=routed)
    if callers or step_loads:  # the model's own name keeps the baseline alone
        candidate_name = sibling_name(candidate.model.name, candidate.version)
    required = cluster.require_benchmark if require_benchmark is None else require_benchmark
    try:
        benchmark_gate_check(version=candidate, required=required)
    except BenchmarkGateError as exc:
        raise ReleaseError(str(exc) + ".", field="candidate_version") from None
    _refuse_if_short_of_memory(cluster, candidate, baseline)
    placed = {"baseline": baseline, "candidate_name": candidate_name, "callers": callers}
    return {**placed, "step_loads": step_loads}


def _unrouted_check(release: Release, *, actor, confirmed: bool) -> dict:
    """The model's unrouted share now, with the limit it is held to; 409 naming the share and
    the unprotected clients when it is above the limit and not confirmed."""
    callers = [caller["model"] for caller in release.callers or []]
    measured = unrouted_recent(
        cluster=release.cluster, models=[release.model.name], via={release.model.name: callers}
    )
    measure = measured.get(release.model.name)
    if measure is None:
        return {}  # no router: nothing bypasses what does not exist
    knobs = release.analysis_settings()
    over = exceeds(measure, max_share=knobs.max_unrouted_share, min_requests=knobs.min_requests)
    if over and not confirmed:
        raise ReleaseError(
            f"{release.model.name} on {release.cluster.name}: {measure.text()} That is above "
            f"analysis.max_unrouted_share ({percent(knobs.max_unrouted_share)}). Move those "
            "clients to the router's HTTP URL, or confirm to start anyway (confirm_unrouted: "
            "true; the console's checkbox).",
            field="confirm_unrouted",
            status=409,
        )
    who = actor.get_username() if actor else ""
    return {
        **measure.to_json(),
        "max_share": knobs.max_unrouted_share,
        "over": over,
        "confirmed": bool(over and confirmed),
        "confirmed_by": who if over and confirmed else "",
    }


def _record(release: Release, *, actor, dry_run: bool) -> None:
    """Under the model's lock: record its SLA on the release, check again that nothing else
    owns the model's serving state, and start the release unless this is a dry run."""
    cluster, model = release.cluster, release.model
    with transaction.atomic():
        # Locked like model_update and alias_set do: the SLA recorded here is the one in force.
        release.sla = Model.objects.select_for_update().get(pk=model.pk).sla
        missing = sla_warning(release.sla, model=model.name)
        if missing and cluster.require_sla:
            raise ReleaseError(
                f"Cluster {cluster.name} requires an SLA (require_sla). {missing}",
                field="candidate_version",
            )
        release.warnings = _start_warnings(release)
        _refuse_if_active(cluster, model, lock=True)
        try:
            refuse_if_busy(cluster, model)
        except DeploymentError as exc:
            raise ReleaseError(exc.message, status=409) from None
        if not dry_run:
            _start(release, actor=actor)


# How recent a node's memory reading must be to judge a release start by (the collector's
# buffer; a node without one is judged again at the load, deployments/push.py).
MEMORY_READING_S = 60.0


def _refuse_if_short_of_memory(cluster, candidate, baseline) -> None:
    """409 naming each node whose last reported free memory less the candidate's files would
    leave under SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES: the candidate loads beside the
    baseline, and a second copy must not take a serving node down. Read from the collector's
    recent points, so no node is called here."""
    need = sum(int(entry.get("size") or 0) for entry in candidate.files())
    reserve = settings.SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES
    readings = node_memory_recent(cluster=cluster.name, since=time.time() - MEMORY_READING_S)
    short = [
        f"{node}: {why}"
        for node, reading in sorted(readings.items())
        if (why := load_refusal(reading, need_bytes=need, reserve_bytes=reserve))
    ]
    if short:
        raise ReleaseError(
            f"v{candidate.version} does not fit beside v{baseline.version} on {cluster.name}: "
            + "; ".join(short),
            field="candidate_version",
            status=409,
        )


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
    for text in release.warnings:
        ReleaseEvent.objects.create(
            release=release, kind="warning", phase=release.phase, actor=who, message=text
        )
    unrouted = release.unrouted_at_start or {}
    if unrouted.get("confirmed"):
        ReleaseEvent.objects.create(
            release=release,
            kind="unrouted",
            phase=release.phase,
            actor=who,
            message=f"{who or 'system'} confirmed starting above the unrouted limit: "
            f"{unrouted.get('text', '')}",
            data=unrouted,
        )
    audit_record(
        actor=actor,
        action="release.created",
        obj=release,
        details={
            "steps": release.steps,
            "strategy": release.strategy,
            **({"unrouted": unrouted} if unrouted else {}),
        },
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
