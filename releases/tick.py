"""One release tick, read top to bottom: load → observe → judge → decide → apply → save.

Level-triggered: each tick takes the release's advisory lock, looks at the
fleet as it is (outside any transaction), lets the pure state machine decide, re-applies the
desired effects (router weights, serving set, alias), then saves the new state with a
guarded update and appends its events in one transaction. A crashed worker loses nothing:
the next tick observes and re-applies.

The pure parts live apart and are tested without a database: which interval is open and
when it is judged (`releases/interval.py`), the gates (`releases/analysis.py`), the policy
(`releases/state_machine.py`).
"""

import copy
import logging
import time

from django.db import transaction
from django.utils import timezone

from deployments import locks
from deployments.freezes import cluster_frozen
from deployments.services import serving_owner_set
from releases import agreement, effects, events, guard_log, interval, observe
from releases.analysis import (
    SLA,
    Metrics,
    analyze,
    caller_check,
    fast_guard,
    first_token_check,
    held_for_streams,
    inter_token_check,
    latency_judge,
    noise_margins_ms,
    p99_within_p_value,
    pace_check,
    statistical_judge,
    tokens_rate_check,
    with_check,
)
from releases.inputs import ReleaseInputError
from releases.models import Release, ReleaseEvent
from releases.routing import access_log_path, samples_log_path
from releases.state_machine import GUARDED, JUDGED, TERMINAL, Observation, Phase, decide

log = logging.getLogger(__name__)

# nginx logs request times in whole milliseconds: latency differences below it are unseen.
LOG_RESOLUTION_MS = 1.0


def release_tick(*, release_id: int) -> Release | None:
    """One tick; returns the release, or None when another tick holds it (or the release no
    longer exists: a queued tick may outlive it). A serving-set load the tick starts runs on
    the fleet lane (releases/loads.py)."""
    with locks.advisory_lock(locks.RELEASE_TICK, release_id) as taken:
        if not taken:
            return None
        release = _load(release_id)
        if release is None or not _tickable(release):
            return release
        before = _snapshot(release)
        # Where the router's log and the clock stand before the nodes are read: an interval
        # opened from this tick's counters counts the router's requests from here, so what
        # the router logged always covers what Triton counted (nothing Triton counted after
        # its reading falls before the log's mark).
        mark = observe.log_mark(access_log_path(release.cluster))
        views = observe.nodes_view(
            release.cluster,
            release.model.name,
            release.candidate.version,
            served_as=release.candidate_name,
            callers=tuple((c["served_as"], int(c["version"])) for c in release.callers or []),
        )
        _sibling_lost(release, views)
        agreement.compare_step(release, samples_log_path(release.cluster), now=mark.at)
        judged = _judge(release, views, mark)
        obs = Observation(now=mark.at, **_observe(release, views), **judged)
        decision = decide(release.spec(), release.state(), obs)
        applied = effects.apply_all(release, decision) if not decision.rejected else []
        _open_if_moved(release, decision.state, views, mark)
        return _save(release, before, decision, obs, applied)


def release_tick_isolated(*, release_id: int) -> Release | None:
    """`release_tick` that never raises: a failure is logged and recorded on that release as
    an `error` event, so one release's failure never stops another's tick (nor the guard)."""
    try:
        return release_tick(release_id=release_id)
    except Exception as exc:
        log.exception("tick of release %s failed", release_id)
        tick_failure_record(release_id=release_id, error=f"Tick failed: {exc!r}")
        return None


def tick_failure_record(*, release_id: int, error: str) -> bool:
    """An `error` event on the release, unless its latest event already says the same (a
    failing tick repeats every second); True when one was written."""
    release = Release.objects.filter(pk=release_id).only("pk", "phase").first()
    if release is None:
        return False
    error = error[:2000]
    last = release.events.order_by("-created_at", "-id").only("kind", "message").first()
    if last is not None and last.kind == "error" and last.message == error:
        return False
    ReleaseEvent.objects.create(release=release, kind="error", phase=release.phase, message=error)
    return True


# --- load ---------------------------------------------------------------------------------


def _load(release_id: int) -> Release | None:
    release = (
        Release.objects.select_related("cluster", "model", "baseline__model", "candidate__model")
        .filter(pk=release_id)
        .first()
    )
    if release is None:
        log.warning("release %s is gone: nothing to tick", release_id)
    return release


def _tickable(release: Release) -> bool:
    """Active, with a stored spec that still parses (a junk one is logged and recorded on the
    release, never ticked)."""
    if not release.is_active:
        return False
    try:
        release.spec()
    except ReleaseInputError as exc:
        log.error("release %s not ticked: its stored %s", release.pk, exc)
        tick_failure_record(release_id=release.pk, error=f"Not ticked: its stored {exc}")
        return False
    return True


def _snapshot(release: Release) -> dict:
    """Every column as loaded, and what watchers see of it, to tell what the tick changed."""
    columns = {f.attname: getattr(release, f.attname) for f in Release._meta.concrete_fields}
    return copy.deepcopy({"columns": columns, "payload": events.release_payload(release)})


# --- observe ------------------------------------------------------------------------------


def _sibling_lost(release: Release, views: dict) -> None:
    """A config canary's sibling (or a graph release's caller's) missing on a node that
    answers (restarted empty: reconcile loads only what the model's own name serves): its
    serving set is applied again, which loads the siblings where they are missing (a no-op
    where they are loaded)."""
    if not release.candidate_name or release.applied_serving != "baseline+candidate":
        return
    lost = [v for v in views.values() if v.live and not v.candidate_loaded]
    # A graph release's callers' siblings count in readiness (releases/observe.py).
    lost += [v for v in views.values() if v.live and release.callers and not v.candidate_ready]
    if lost:
        release.applied_serving = ""


def _observe(release: Release, views: dict) -> dict:
    """The fleet's facts the state machine reads, and a waiting human action."""
    live = [v for v in views.values() if v.live]
    fields = {
        # READY on every node, and the load that put it there (its warm-up included) done.
        "candidate_ready": bool(live)
        and len(live) == len(views)
        and all(v.candidate_ready for v in live)
        and (release.phase != "LOADING" or release.applied_serving == "baseline+candidate"),
        "load_failed": bool(release.load_error),
        "load_error": release.load_error,
        "router_applied_weight": release.router_weight,
        "router_mirroring": bool(release.router_mirror),
        "baseline_drained": observe.pending_requests(views, release.baseline.version) == 0,
        "in_flight_done": observe.pending_requests(views, release.candidate.version) == 0,
        "candidate_unloaded": bool(live) and not any(v.candidate_loaded for v in live),
        "nodes_out": tuple(sorted(n for n, v in views.items() if not v.candidate_ready)),
        "frozen": cluster_frozen(release.cluster.name),
    }
    if release.pending_action:
        fields.update(
            action=release.pending_action["action"],
            actor=release.pending_action.get("actor", ""),
            action_reason=release.pending_action.get("reason", ""),
        )
    return fields


# --- judge --------------------------------------------------------------------------------


def _judge(release: Release, views: dict, mark: observe.LogMark) -> dict:
    """Open, watch or judge the analysis interval (releases/interval.py says which); the fast
    guard on a watched one, the gates' verdict on a judged one. Updates `release.interval`
    and, with a verdict, `release.last_analysis`."""
    now = mark.at
    phase = Phase(release.phase)
    step_mark = _marker(phase, release.step_index, release.candidate_weight)
    step = interval.next_step(
        release.interval,
        mark=step_mark,
        now=now,
        seconds=release.analysis_interval_s,
        judging=phase in JUDGED,
    )
    if step == "open":
        carried = _carried(release, views)
        release.interval = interval.opened(step_mark, observe.counters_now(views, mark), carried)
        return {}
    start = release.interval["start"]
    metrics = observe.interval_metrics(release, views, release.interval)
    seen = {role: metrics[role].worst_counts() for role in ("candidate", "baseline")}
    totals = interval.totals(release.interval, seen)
    release.interval = {
        **release.interval,
        "start": interval.rebased(start, observe.live_counters(views)),
    }
    fields = _guard(release, totals, now) if phase in GUARDED else {}
    if step == "judge":
        fields.update(_verdict(release, metrics, now, started=start["at"]))
        release.interval = interval.opened(step_mark, observe.counters_now(views, mark), totals)
    return fields


def _open_if_moved(release: Release, state, views: dict, mark: observe.LogMark) -> None:
    """The step or weight this tick moved to gets its interval now, so the next tick already
    guards the traffic the router sends at it (opening it then would cost the guard a tick)."""
    step_mark = _marker(state.phase, state.step_index, state.candidate_weight)
    if (release.interval or {}).get("marker") != step_mark:
        carried = _carried(release, views)
        # The router serves the new weight from now (its apply waits for nginx to say so).
        release.interval = interval.opened(
            step_mark, observe.counters_now(views, mark), carried, routed_at=time.time()
        )


def _marker(phase: Phase, step_index: int, weight: float) -> list:
    """The interval's marker: a shadow's intervals are its own (the candidate at 0 % gets
    copies then, and none while loading)."""
    return interval.marker(step_index, weight, shadow=phase is Phase.SHADOWING)


def _carried(release: Release, views: dict) -> dict:
    """The guard's counts up to now, as a new interval starts: the closing interval's (when
    the step or weight moved under it) added to those it carried."""
    closing = release.interval or {}
    if not closing.get("start"):
        return interval.totals(closing, {})
    metrics = observe.interval_metrics(release, views, closing)
    seen = {role: metrics[role].worst_counts() for role in ("candidate", "baseline")}
    return interval.totals(closing, seen)


def _sla(release: Release) -> SLA:
    # Recorded at creation, so a loosened live SLA cannot pass the gates (a row made
    # without release_create has none: the model's then).
    sla = release.sla or release.model.sla
    return SLA(
        p99_latency_ms=sla["p99_latency_ms"],
        min_success_rate=sla["min_success_rate"],
        max_queue_ms=sla["max_queue_ms"],
    )


def _guard(release: Release, totals: dict, now: float) -> dict:
    """The fast guard on the candidate's requests and errors since it first took traffic
    (`totals`, releases/interval.py), against the SLA or a worse baseline."""
    knobs = release.analysis_settings()  # defaults and ranges: releases/inputs.py
    (cand_n, cand_e), (base_n, base_e) = totals["candidate"], totals["baseline"]
    guard = fast_guard(
        Metrics(requests=cand_n, errors=cand_e),
        _sla(release),
        baseline=Metrics(requests=base_n, errors=base_e),
        min_requests=knobs.fast_guard_min_requests,
        min_errors=knobs.fast_guard_min_errors,
        error_rate_floor=knobs.fast_guard_error_floor,
        z=knobs.fast_guard_z,
    )
    # The cockpit draws these per-tick samples; they live in the cache between writes.
    release.guard_samples = guard_log.guard_record(release, guard, at=now)
    return {"fast_guard_tripped": guard.tripped, "fast_guard_reason": guard.reason}


def _verdict(release: Release, metrics: dict, now: float, *, started: float) -> dict:
    """The gates' verdict on a finished interval, recorded in `release.last_analysis`."""
    spec, knobs = release.spec(), release.analysis_settings()
    p_values = _p_values(metrics)
    latencies = metrics["latencies"]
    p_values["p99_p_value"] = p99_within_p_value(
        latencies["candidate"], latencies["baseline"], spec.latency_tolerance
    )
    judge = latency_judge(
        p_values["latency_p_value"],
        (len(latencies["candidate"]), len(latencies["baseline"])),
        mode=knobs.latency_judge,
        min_samples=knobs.judge_min_samples,
        alpha=knobs.judge_alpha,
        p99_p_value=p_values["p99_p_value"],
    )
    # Below the judge's sample minimum, the slack is the baseline's own noise in this
    # interval, never below the router log's millisecond resolution; the setting only
    # without per-request latencies.
    noise = None if judge.decisive else _noise(latencies["baseline"])
    verdict = analyze(
        metrics["candidate"],
        metrics["baseline"],
        _sla(release),
        min_requests=spec.min_requests,
        latency_tolerance=spec.latency_tolerance,
        latency_margin_ms=noise or knobs.latency_margin_ms,
        judge=judge,
        resolution_ms=LOG_RESOLUTION_MS,
    )
    verdict = _with_stream_checks(verdict, metrics, spec, knobs, release.sla or {})
    verdict, callers = _with_caller_checks(release, verdict)
    if 0 < release.candidate_weight < 100:  # both versions serve at this weight
        verdict = held_for_streams(verdict, *_stream_counts(metrics))
    release.last_analysis = events.analysis_payload(release, verdict, metrics, now, started=started)
    release.last_analysis["judge"] = {
        **p_values,
        "decisive": judge.decisive,
        "p99_decisive": judge.p99_decisive,
    }
    if callers:
        release.last_analysis["callers"] = callers
    release.last_analysis["latency_margin_ms"] = (
        {k: round(v, 3) for k, v in noise.items()} if noise else knobs.latency_margin_ms
    )
    result, reason = _with_agreement(release, verdict.result, verdict.reason)
    return {"verdict": result, "verdict_reason": reason, "verdict_at": now}


def _with_stream_checks(verdict, metrics: dict, spec, knobs, sla: dict):
    """The verdict with a streaming model's checks: time to first token (against the
    baseline's and the SLA's), then the time between tokens where both versions count
    their tokens (against the baseline's and the SLA's, and the SLA's tokens per second),
    else the pace after the first token (releases/analysis.py; none without enough streams
    a side)."""
    rule = {"tolerance": spec.latency_tolerance, "alpha": knobs.judge_alpha}
    first, pace = metrics["first_token"], metrics["stream_pace"]
    prompts, sizes = metrics["prompt_sizes"], metrics["pace_sizes"]
    first_token = first_token_check(
        first["candidate"],
        first["baseline"],
        margin_ms=LOG_RESOLUTION_MS,
        sla_ms=sla.get("p95_first_token_ms"),
        sizes=(prompts["candidate"], prompts["baseline"]),
        **rule,
    )
    verdict = with_check(verdict, first_token)
    cand, base = (metrics.get("tokens") or {}).get("candidate"), metrics["tokens"].get("baseline")
    if cand is None or base is None:
        paced = pace_check(
            pace["candidate"], pace["baseline"], sizes=(sizes["candidate"], sizes["baseline"]),
            **rule,
        )  # fmt: skip
        return with_check(verdict, paced)
    between = inter_token_check(
        cand.inter_token_ms, base.inter_token_ms, sla_ms=sla.get("p95_inter_token_ms"),
        sizes=(cand.sizes, base.sizes), **rule,
    )  # fmt: skip
    verdict = with_check(verdict, between)
    return with_check(verdict, tokens_rate_check(cand.tokens_per_s, sla.get("min_tokens_per_s")))


def _stream_counts(metrics: dict) -> tuple[tuple[int, int], tuple[int | None, int | None]]:
    """(streams, routed requests) of the candidate and the baseline in an interval: the
    streams its stream checks compare (`held_for_streams`)."""
    roles = ("candidate", "baseline")
    streams = tuple(len(metrics["first_token"][r]) for r in roles)
    return streams, tuple(metrics[r].router_requests for r in roles)


def _with_caller_checks(release: Release, verdict):
    """The verdict with a graph release's checks of its callers (releases/analysis.py
    `caller_check`: each caller's requests through the candidate against its SLA, recorded
    at the start, and through the baseline), and what each caller's arms saw."""
    spec, seen = release.spec(), {}
    measured = observe.caller_metrics(release, release.interval)
    for caller in release.callers or []:
        name, recorded = caller["model"], caller.get("sla") or {}
        if name not in measured:
            continue
        arms = measured[name]
        check = caller_check(
            name,
            arms["candidate"],
            arms["baseline"],
            SLA(**{k: recorded.get(k) for k in ("p99_latency_ms", "min_success_rate")}),
            min_requests=spec.min_requests,
            latency_tolerance=spec.latency_tolerance,
            latency_margin_ms=_noise(arms["latencies"]["baseline"]) or LOG_RESOLUTION_MS,
        )
        verdict = with_check(verdict, check)
        seen[name] = {
            **{role: _arm(arms[role]) for role in ("baseline", "candidate")},
            "check": None if check is None else {"passed": check.passed, "text": check.text},
        }
    return verdict, seen


def _noise(latencies: list[float]) -> dict | None:
    """The baseline's own noise in an interval as the latency slack (releases/analysis.py
    `noise_margins_ms`), never below the router log's millisecond resolution; None with
    too few latencies."""
    noise = noise_margins_ms(latencies)
    return None if noise is None else {k: max(ms, LOG_RESOLUTION_MS) for k, ms in noise.items()}


def _arm(metrics: Metrics) -> dict:
    return {"requests": metrics.requests, "errors": metrics.errors, "p99_ms": metrics.p99_ms}


def _with_agreement(release: Release, result: str, reason: str) -> tuple[str, str]:
    """A shadow's verdict with its answer-agreement gate (releases/agreement.py): a failed
    gate fails the interval, one that has not compared enough keeps it from passing."""
    gate = agreement.agreement_verdict(release) if release.phase == "SHADOWING" else None
    if gate is None or result == "fail":
        return result, reason
    if gate[0] == "fail" or result == "pass":
        release.last_analysis["agreement"] = gate[1]
        return gate
    return result, f"{reason}; {gate[1]}"


def _p_values(metrics: dict) -> dict:
    """The statistical judge's p-values: the latency one decides the latency-vs-baseline
    checks when the judge is decisive (releases/analysis.py `latency_judge`)."""
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


# --- decide (releases/state_machine.py) and apply (releases/effects.py) are one call each --
# --- save ---------------------------------------------------------------------------------


def _changes(release: Release, before: dict, decision) -> dict:
    """The columns this tick changed: the new state's, and those observing, judging and
    applying set on the row (every column of the model is compared: no list to keep)."""
    now = {f.attname: getattr(release, f.attname) for f in Release._meta.concrete_fields}
    now.update(release.state_fields(decision.state))
    # Guard samples change every guarded tick; they ride along with a write, never cause one.
    now.pop("guard_samples", None)
    return {name: value for name, value in now.items() if value != before["columns"][name]}


def _save(
    release: Release, before: dict, decision, obs: Observation, applied: list[ReleaseEvent]
) -> Release:
    """A guarded update (lost to a concurrent save: the next tick starts from theirs) with the
    tick's events; watchers hear of it only when they can see a change."""
    fields = _changes(release, before, decision)
    quiet = not (applied or decision.events or obs.action is not None or obs.verdict is not None)
    if quiet and not fields:
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
        rows = _event_rows(release, decision, obs) + applied
        ReleaseEvent.objects.bulk_create(rows)
        if finished:
            serving_owner_set(cluster=release.cluster, model=release.model, owner="")
            # The row holds the guard's samples from now on. Dropped before the commit, so
            # nobody who sees the release ended finds the cache's copy (ticks of a release
            # never overlap: nothing writes it again); a failed commit leaves the row's.
            guard_log.guard_forget(release.pk)
        if rows or obs.action is not None or _seen_change(release, before, fields):
            # Watchers refetch the cockpit on each message: only for what they can see.
            transaction.on_commit(lambda: events.publish(release.pk))
    for name, value in fields.items():  # the row as just written, without reading it back
        setattr(release, name, value)
    return release


def _event_rows(release: Release, decision, obs: Observation) -> list[ReleaseEvent]:
    """The verdict (first), then the state machine's events."""
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
    ]
    if obs.verdict is not None:
        verdict = ReleaseEvent(
            release=release,
            kind="analysis",
            data=release.last_analysis,
            phase=release.phase,
            message=f"{obs.verdict}: {obs.verdict_reason}",
        )
        rows.insert(0, verdict)
    return rows


def _seen_change(release: Release, before: dict, fields: dict) -> bool:
    """True when the cockpit's payload (events.release_payload) differs after `fields`."""
    after = copy.copy(release)
    for name, value in fields.items():
        setattr(after, name, value)
    return events.release_payload(after) != before["payload"]
