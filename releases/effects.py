"""Applying a decision's effects: desired state, re-applied idempotently and in order.

Router weights first (traffic is pinned to explicit versions before the candidate loads),
then the serving set on every node, then the alias. A config canary's sibling is unloaded
once the release has ended and its route is gone. The first effect that fails stops the
list; it is recorded as an event and the next tick tries again.
"""

from deployments.push import CorruptArtifact
from deployments.serving import LoadFailed
from integrations.routers import RouterError
from models_registry.services import alias_set
from releases.loads import LoadPending, serving_load_step, siblings_of, siblings_unload
from releases.models import Release, ReleaseEvent
from releases.routing import router_changing, router_for, router_state, routes_for
from releases.state_machine import TERMINAL, LoadServingSet, MoveAlias, SetWeights


def _routes(release: Release, weight: float | None, live=None, mirror: float = 0.0) -> list:
    """Routes of every other active release on the cluster, plus this one's (unless None).

    Another release's route is taken from `live` (what the router serves) when it is there:
    that release may have applied a new split and not yet recorded it (its tick writes after
    its effects), and rebuilding its route from the row would undo that split.
    """
    others = (
        Release.objects.filter(cluster=release.cluster)
        .exclude(pk=release.pk)
        .exclude(phase__in=[p.value for p in TERMINAL])
        .select_related("model", "baseline", "candidate")
    )
    served = {route.model: route for route in live.routes} if live is not None else {}
    routes = []
    for other in others:
        ours = {other.baseline.version, other.candidate.version}
        for built in routes_for(other, other.router_weight or 0.0, other.router_mirror or 0.0):
            route = served.get(built.model)
            # none yet, or an older release's: the one built from the row
            routes.append(built if route is None or not set(route.weights) <= ours else route)
    if weight is not None:
        routes += routes_for(release, weight, mirror)
    return routes


def current_routes(cluster) -> list:
    """The routes of every active release on a cluster, at the weights last applied."""
    active = (
        Release.objects.filter(cluster=cluster)
        .exclude(phase__in=[p.value for p in TERMINAL])
        .select_related("model", "baseline", "candidate")
    )
    return [
        route
        for r in active
        if r.router_weight is not None
        for route in routes_for(r, r.router_weight or 0.0, r.router_mirror or 0.0)
    ]


def set_weights(release: Release, weight: float | None, mirror: float = 0.0) -> None:
    """Apply the router split (None: drop this release's route) and the share mirrored to
    the candidate (a shadow); records both as applied."""
    router = router_for(release.cluster)
    with router_changing(release.cluster):
        live = router.current()
        routes = _routes(release, weight, live, mirror)
        router.apply(router_state(release.cluster, routes, live))
    release.router_weight = weight
    release.router_mirror = mirror if weight is not None else None


def load_serving(release: Release, which: str, *, inline: bool) -> None:
    """Make exactly these versions loaded on every node (desired state first), by a load on
    the fleet lane that this tick starts or observes (releases/loads.py): LoadPending while
    it runs (the effects after it wait), LoadFailed naming the nodes that did not load them."""
    serving_load_step(release, which, inline=inline)
    release.applied_serving = which


def _one(release: Release, effect, *, inline: bool) -> str | None:
    """Apply one effect; returns a message when it did something worth an event."""
    if isinstance(effect, SetWeights):
        mirror = release.shadow_share if effect.mirror else 0.0
        if release.router_weight != effect.candidate or (release.router_mirror or 0.0) != mirror:
            set_weights(release, effect.candidate, mirror)
            copies = f", {mirror:g}% of requests mirrored to it" if mirror else ""
            return f"router: {effect.candidate:g}% to v{release.candidate.version}{copies}"
    elif isinstance(effect, LoadServingSet):
        if release.applied_serving != effect.versions:
            load_serving(release, effect.versions, inline=inline)
            return f"serving set on every node: {effect.versions}"
    elif isinstance(effect, MoveAlias):
        alias = release.model.aliases.filter(name=effect.alias).first()
        if alias is None or alias.version_id != release.candidate_id:
            alias_set(
                model=release.model,
                name=effect.alias,
                version=release.candidate,
                actor=None,
                release_id=release.pk,
            )
            return f"alias {effect.alias} → v{release.candidate.version}"
    return None


def apply_all(release: Release, decision) -> list[ReleaseEvent]:
    """Apply the decision's effects in order; events for what changed or failed. A load
    still running stops the list quietly (the next tick observes it). A terminal phase's
    set loads in this thread: it only unloads what the release no longer serves, and the
    release is not ticked again to observe a load on the fleet lane."""
    done = []
    inline = decision.state.phase in TERMINAL
    try:
        for effect in decision.effects:
            message = _one(release, effect, inline=inline)
            if message:
                done.append(_event(release, decision, "effect", message))
        if decision.state.phase in TERMINAL and release.router_weight is not None:
            set_weights(release, None)  # final serving set alone: the route is not needed
            done.append(_event(release, decision, "effect", "router: route removed"))
            if release.candidate_name:
                done.append(_sibling_unloaded(release, decision))
    except LoadFailed as exc:
        if decision.state.phase.value == "LOADING":
            release.load_error = str(exc)  # the candidate cannot load: the release fails
        done.append(_event(release, decision, "effect_failed", str(exc)))
    except (RouterError, CorruptArtifact) as exc:
        done.append(_event(release, decision, "effect_failed", str(exc)))
    except LoadPending:
        pass  # a load on the fleet lane: observed by the next tick
    return done


def _sibling_unloaded(release: Release, decision) -> ReleaseEvent:
    """Unload the candidate's sibling once no route sends to it: a promoted candidate serves
    under the model's own name by now, a rolled-back one nowhere."""
    names = siblings_of(release)
    failed = siblings_unload(release)
    if failed:
        listed = "; ".join(f"{node}: {error}" for node, error in failed.items())
        return _event(release, decision, "effect_failed", f"unloading siblings failed: {listed}")
    return _event(release, decision, "effect", f"{', '.join(names)} unloaded from every node")


def _event(release: Release, decision, kind: str, message: str) -> ReleaseEvent:
    return ReleaseEvent(
        release=release, kind=kind, phase=decision.state.phase.value, message=message
    )
