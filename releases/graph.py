"""Releases of a graph: a step that ensembles call, judged on their traffic too, and an
ensemble whose candidate pins a step version the cluster does not serve, which is loaded
for it (docs/ARCHITECTURE.md). Both need the candidate under its sibling name
(releases/configs.py): the model's own name, and every caller with it, keeps the baseline.
"""

from accounts.errors import Refused
from deployments.selectors import callers_serving, desired_state
from deployments.temporary import sibling_name
from integrations.triton.model_config.graph import model_calls
from models_registry.models import ModelVersion
from releases.selectors import active_releases_of, routed_rate


def graph_callers(*, cluster, candidate, routed: bool) -> list[dict]:
    """The callers a release of the candidate's model is judged on: each ensemble serving on
    `cluster` with a step on the model at its newest version, as {"model", "version",
    "served_as"} (a graph release: the candidate serves under its sibling name, so the
    model's own name and every caller keep the baseline; the caller's sibling, the same
    version calling the candidate's sibling, takes the step's share of the caller's traffic
    through the router). [] when nothing calls the model.

    409 naming each caller the router cannot split: a BLS model (its code calls the model
    by name, so it keeps the baseline until promotion and then takes the candidate
    unjudged), an ensemble pinning a version (a promotion takes that version away), any
    caller on a cluster without a router, and one under a release of its own."""
    calling = callers_serving(cluster=cluster, model=candidate.model.name)
    why, callers = [], []
    for caller, step in calling:
        name = caller.model.name
        if caller.config_json.get("platform") != "ensemble":
            why.append(f"{name} v{caller.version} is a BLS model calling {step} from its code")
        elif step.version is not None:
            why.append(f"{name} v{caller.version} pins {step}, which a promotion unloads")
        elif not routed:
            why.append(f"{name} v{caller.version} calls {step} and no router can split it")
        elif active_releases_of(model=caller.model).filter(cluster=cluster).exists():
            why.append(f"{name} has an active release of its own on {cluster.name}")
        else:
            served_as = sibling_name(name, caller.version)
            callers.append(
                {
                    "model": name,
                    "version": caller.version,
                    "served_as": served_as,
                    "sla": caller.model.sla,  # as the release starts: judged against it
                }
            )
    if why:
        message = (
            f"Models on {cluster.name} call {candidate.model.name} in ways a release cannot "
            f"judge: {'; '.join(why)}. Release a version of the caller that calls "
            f"v{candidate.version}, or ship {candidate.model.name} with a deployment."
        )
        raise Refused(message, field="candidate_version", status=409)
    return sorted(callers, key=lambda c: c["model"])


def steps_to_load(*, cluster, candidate, routed: bool) -> list[dict]:
    """What the candidate calls that the cluster does not serve at the version it needs,
    loaded for it: an ensemble pinning a step version its step does not serve gets that
    version under the step's sibling name while it is a candidate (its own sibling calls
    it), then, at promotion, beside the step's versions under the step's own name (steps
    first, then the ensemble: docs/ARCHITECTURE.md). [{"model", "version", "served_as"}].

    409 naming each call that cannot be: a model serving nothing there, a step called at
    its newest, a BLS model's declared call (a release brings nothing a BLS model calls: a
    deployment does, deployments/services.py `calls_planned`), a version not registered, no
    router (the candidate serves as a sibling), and a version newer than what the step
    serves while clients call the step unversioned through the router or other models
    call its newest (Triton's newest would move them to it at promotion, unjudged)."""
    serving = desired_state(cluster=cluster)
    missing, loads = [], []
    for step in model_calls(candidate.config_json or {}):
        versions = serving.get(step.model) or []
        if versions and (step.version is None or step.version in versions):
            continue
        why = _unloadable(cluster, candidate, step, versions, routed)
        if why:
            missing.append(why)
        else:
            loads.append(
                {
                    "model": step.model,
                    "version": step.version,
                    "served_as": sibling_name(step.model, step.version),
                }
            )
    if missing:
        message = (
            f"v{candidate.version} of {candidate.model.name} calls {'; '.join(missing)} on "
            f"{cluster.name}: serve what it calls there first (a release or deployment of "
            "each), or release a version calling what serves."
        )
        raise Refused(message, field="candidate_version", status=409)
    return loads


def _unloadable(cluster, candidate, step, versions: list[int], routed: bool) -> str:
    """Why the release cannot load `step` for the candidate ("" when it can)."""
    listed = ", ".join(f"v{v}" for v in versions)
    if not versions or step.version is None:
        return f"{step} (serving {listed or 'nothing'} there)"
    if candidate.config_json.get("platform") != "ensemble" or not routed:
        return f"{step} (serving {listed} there; only an ensemble behind a router brings it)"
    if not ModelVersion.objects.filter(model__name=step.model, version=step.version).exists():
        return f"{step} (not registered)"
    if step.version < max(versions):
        return ""
    newest = [
        f"{caller.model.name} v{caller.version}"
        for caller, call in callers_serving(cluster=cluster, model=step.model)
        if call.version is None and caller.model_id != candidate.model_id
    ]
    routed_now = routed_rate(cluster=cluster, model=step.model)
    if newest or (routed_now and routed_now[0]):
        who = ", ".join(newest) or f"{routed_now[0]} unversioned requests through the router"
        return (
            f"{step} (serving {listed} there; it would become {step.model}'s newest, which "
            f"{who} call: release {step.model} v{step.version} first)"
        )
    return ""
