"""A release's serving set, loaded outside its tick.

Loading a candidate can take minutes (a big model, a slow initialize()); a tick must stay
short, or the releases lane's slots wait on it and every other release's guard with them.
So the tick starts a load and observes it: `serving_load_step` records the desired set
(desired state first, as everywhere), queues a `ServingLoad` row for the fleet lane and
answers, on each later tick, "still loading" (LoadPending), "failed" (LoadFailed) or
"done". `load_run` is the task's body: it claims the row, holds a lease on it while
serving_set_apply loads every node, and writes the outcome.

Nothing is lost when a process dies: a row whose worker stopped beating is finished as
failed by the next tick (which starts a new load when the phase still wants one); a row
still queued after a lease (its message lost with a Redis restart, say) is sent again, and
the claim lets only one worker run it.

A config canary's candidate (release.candidate_name) loads under its sibling name, after the
model's own name is made to serve the baseline alone; a graph release's callers then load
their siblings calling it (release.callers). Step versions an ensemble candidate pins and the
cluster did not serve (release.step_loads) load under their sibling names before it, and
beside the step's versions before its promotion. The baseline's set of a rollback unloads
the siblings, callers' first, and the end of the release makes sure they are gone
(releases/effects.py).
"""

import logging
from datetime import timedelta

from celery import current_app
from django.db import transaction
from django.utils import timezone

from deployments import leases, locks
from deployments.push import CorruptArtifact
from deployments.services import serving_state_set, serving_versions
from deployments.serving import LoadFailed, serving_set_apply, sibling_set_apply, sibling_unload
from models_registry.models import ModelVersion
from releases.models import Release, ServingLoad

log = logging.getLogger(__name__)

SERVING = {
    "baseline+candidate": ("baseline", "candidate"),
    "candidate": ("candidate",),
    "baseline": ("baseline",),
}
LOAD_TASK = "releases.serving_load"
S = ServingLoad.Status


class LoadPending(Exception):
    """The serving set is still loading on the fleet lane; the message says since when."""


def sibling_wanted(release: Release, which: str) -> bool:
    """Whether `which` has the candidate served under its sibling name (a config canary's
    baseline+candidate set)."""
    return bool(release.candidate_name) and len(SERVING[which]) > 1


def serving_versions_of(release: Release, which: str) -> list:
    """The versions the model's own name serves for `which`; a candidate served under its
    sibling name is not among them while the baseline serves."""
    roles = ("baseline",) if sibling_wanted(release, which) else SERVING[which]
    return [getattr(release, role) for role in roles]


def serving_load_step(release: Release, which: str, *, inline: bool = False) -> None:
    """Return once `which` is loaded on every node by a load this release started; raise
    LoadPending while it runs, LoadFailed when it failed (each outcome is taken once: the
    next call after a failure starts a new load). `inline` runs the load in this thread
    instead of on the fleet lane: only for a terminal phase's set (releases/effects.py), which
    no later tick would observe."""
    job = release.loads.filter(which=which, seen_at__isnull=True).first()
    if job is None:
        job = _start(release, which, inline=inline)
    if job.status in (S.QUEUED, S.RUNNING):
        job = _lost_or_resent(job)
    if job.status in (S.QUEUED, S.RUNNING):
        since = (job.started_at or job.created_at).strftime("%H:%M:%S")
        raise LoadPending(f"loading {which}: {job.status} since {since} UTC")
    ServingLoad.objects.filter(pk=job.pk).update(seen_at=timezone.now())
    if job.status == S.FAILED:
        raise LoadFailed({}, what=job.error or f"loading {which} failed")


def _start(release: Release, which: str, *, inline: bool) -> ServingLoad:
    with transaction.atomic():
        versions = serving_versions_of(release, which)
        serving_state_set(cluster=release.cluster, model=release.model, versions=versions)
        job = ServingLoad.objects.create(release=release, which=which, queued_at=timezone.now())
    if inline:
        load_run(load_id=job.pk)
    else:
        current_app.send_task(LOAD_TASK, args=[job.pk])
    job.refresh_from_db()
    return job


def _lost_or_resent(job: ServingLoad) -> ServingLoad:
    """A running row whose lease ran out is finished as failed; a row queued for longer than
    a lease is sent again. The row as it is now."""
    now = timezone.now()
    lease = timedelta(seconds=leases.lease_s())
    rows = ServingLoad.objects.filter(pk=job.pk)
    if leases.lost(rows.filter(status=S.RUNNING), now=now).exists():
        seen = job.heartbeat_at or job.started_at
        why = f"its worker stopped (no heartbeat since {seen:%H:%M:%S} UTC); will load again"
        rows.filter(status=S.RUNNING).update(status=S.FAILED, error=why, finished_at=now)
    elif job.status == S.QUEUED and job.queued_at < now - lease:
        if rows.filter(status=S.QUEUED, queued_at=job.queued_at).update(queued_at=now):
            log.warning("load %s of release %s still queued: sent again", job.pk, job.release_id)
            current_app.send_task(LOAD_TASK, args=[job.pk])
    return rows.get()


def load_run(*, load_id: int) -> str:
    """Claim a queued load and run it; its status after (a load another worker claimed, or
    finished, is left alone: safe to run twice)."""
    now = timezone.now()
    claimed = ServingLoad.objects.filter(pk=load_id, status=S.QUEUED).update(
        status=S.RUNNING, started_at=now, heartbeat_at=now
    )
    job = (
        ServingLoad.objects.select_related(
            "release__cluster", "release__model", "release__baseline", "release__candidate"
        )
        .filter(pk=load_id)
        .first()
    )
    if job is None or not claimed:
        return job.status if job else "gone"
    rows = ServingLoad.objects.filter(pk=load_id)
    try:
        with leases.lease_held(rows, what=f"load {load_id}"):
            error = _apply(job)
    except Exception as exc:  # never leave the row RUNNING behind a bug
        log.exception("load %s failed", load_id)
        error = f"loading {job.which} failed: {exc!r}"
    status = S.FAILED if error else S.SUCCEEDED
    rows.filter(status=S.RUNNING).update(status=status, error=error, finished_at=timezone.now())
    return status


def siblings_of(release: Release) -> list[str]:
    """The names a release serves beside its model's own, in unload order: its callers'
    siblings (a graph release) before the candidate's they call, and the steps loaded for
    the candidate after it."""
    callers = [caller["served_as"] for caller in release.callers or []]
    own = [release.candidate_name] if release.candidate_name else []
    return [*callers, *own, *(step["served_as"] for step in release.step_loads or [])]


def siblings_unload(release: Release) -> dict[str, str]:
    """Unload the release's siblings from every node, callers' first; {"node (name)": error}
    of those that failed (the candidate's is kept while a caller's still calls it)."""
    for name in siblings_of(release):
        failed = sibling_unload(cluster=release.cluster, name=name)
        if failed:
            return {f"{node} ({name})": error for node, error in failed.items()}
    return {}


def _sibling_gone(release: Release) -> None:
    """A rolled-back config canary or graph release: its siblings unloaded from every node
    (LoadFailed naming the nodes where that failed), so no node serves the candidate any
    more."""
    failed = siblings_unload(release)
    if failed:
        raise LoadFailed(failed, what="unloading the release's siblings failed")


def _version(model: str, version: int) -> ModelVersion:
    return ModelVersion.objects.select_related("model").get(model__name=model, version=version)


def _steps_apply(release: Release, *, promoted: bool) -> dict[str, str]:
    """The step versions the candidate pins and the cluster did not serve: under their
    sibling names while it is a candidate, or, at its promotion (`promoted`), beside the
    step's versions under the step's own name (desired state first); {step: the name the
    candidate calls it by} (LoadFailed naming the nodes)."""
    calls = {}
    for step in release.step_loads or []:
        version = _version(step["model"], step["version"])
        if not promoted:
            sibling_set_apply(cluster=release.cluster, version=version, name=step["served_as"])
            calls[step["model"]] = step["served_as"]
            continue
        model = version.model
        have = serving_versions(cluster=release.cluster, model=model)
        if version not in have:
            versions = sorted([*have, version], key=lambda v: v.version)
            with transaction.atomic():
                serving_state_set(cluster=release.cluster, model=model, versions=versions)
            serving_set_apply(
                cluster=release.cluster, versions=versions, warm_version=version.version
            )
    return calls


def _callers_apply(release: Release) -> None:
    """A graph release's callers served beside themselves under their sibling names, each
    calling the candidate's sibling instead of the model (LoadFailed naming the nodes)."""
    for caller in release.callers or []:
        version = _version(caller["model"], caller["version"])
        sibling_set_apply(
            cluster=release.cluster,
            version=version,
            name=caller["served_as"],
            calls_to={release.model.name: release.candidate_name},
        )


def _apply(job: ServingLoad) -> str:
    """Load the row's set on every node, one load of a release at a time; the error or ""."""
    release = job.release
    with locks.advisory_lock(locks.SERVING_LOAD, release.pk, wait=True):
        newer = release.loads.filter(pk__gt=job.pk).exists()
        if newer:  # the release wants another set now: that load applies it
            return f"superseded by a later load of release {release.pk}"
        sibling = sibling_wanted(release, job.which)
        warm = release.candidate.version if "candidate" in SERVING[job.which] else None
        try:
            if job.which == "candidate":  # what the promoted version pins serves first
                _steps_apply(release, promoted=True)
            serving_set_apply(
                cluster=release.cluster,
                versions=serving_versions_of(release, job.which),
                warm_version=None if sibling else warm,
            )
            if sibling:
                sibling_set_apply(
                    cluster=release.cluster,
                    version=release.candidate,
                    name=release.candidate_name,
                    calls_to=_steps_apply(release, promoted=False),
                )
                _callers_apply(release)
            elif release.candidate_name and job.which == "baseline":
                _sibling_gone(release)
        except LoadFailed as exc:
            what = f"loading {job.which} failed on {len(exc.failures)} node(s)"
            return str(LoadFailed(exc.failures, what=what))
        except CorruptArtifact as exc:
            return f"loading {job.which} failed: {exc}"
    return ""
