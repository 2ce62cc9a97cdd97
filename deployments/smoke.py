"""Smoke validation: load a new version on one node under a temporary name, infer once with
generated inputs, record latency and output shapes in its validation report, unload. An
ensemble's steps are loaded first, each under a temporary name of its own that the
ensemble's config is rewritten to call, so its answer comes through its steps.

A version's code is untrusted until it passed (docs/SECURITY.md): the smoke node is a node
(not marked down) of a staging cluster, or of SWITCHYARD_SMOKE_CLUSTER, that serves no
model at all and allows the version's backend, so a version that crashes its node takes
nothing else down. A node that dies during the smoke (its load runs the warm-up inference,
then one inference) fails the smoke with that reason and raises an alert
(deployments.signals.smoke_node_lost)."""

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from deployments import locks, own_traffic, push, temporary
from deployments.backends import cluster_allows, version_backend
from deployments.models import TritonCluster, TritonNode
from deployments.signals import smoke_node_lost
from deployments.validation import tensor_limits
from integrations.triton.errors import TritonError
from integrations.triton.exits import child_exit, child_serving
from integrations.triton.inputs import generate_inputs
from integrations.triton.model_config.graph import CALLS_PARAMETER, is_ensemble, model_calls
from integrations.triton.stream import generate_body, is_decoupled, stream_once
from models_registry import selectors as registry_selectors
from models_registry.models import ModelVersion

log = logging.getLogger(__name__)


class NodeLost(Exception):
    """The smoke node stopped answering during the smoke inference."""


def smoke_node(version: ModelVersion | None = None) -> tuple[TritonNode | None, str]:
    """The node smoke tests of `version` run on, or None and why there is none."""
    name = settings.SWITCHYARD_SMOKE_CLUSTER
    clusters = TritonCluster.objects.all()
    clusters = clusters.filter(name=name) if name else clusters.filter(environment="staging")
    where = f"cluster '{name}' (SWITCHYARD_SMOKE_CLUSTER)" if name else "staging cluster"
    if not clusters.exists():
        return None, f"no smoke test: there is no {where}"
    idle = clusters.exclude(serving__serving_versions__isnull=False).distinct()
    if not idle.exists():
        return None, (
            f"no smoke test: no {where} is idle (each serves models); smoke tests run only on "
            "a cluster that serves nothing, since a version under test may crash its node"
        )
    if version is not None:
        backend = version_backend(version)
        idle = [c for c in idle if cluster_allows(c, backend)]
        if not idle:
            return None, f"no smoke test: no idle {where} allows backend '{backend}'"
    # A node may be listed in two clusters: one that serves elsewhere is not idle either.
    serving = TritonNode.objects.filter(cluster__serving__serving_versions__isnull=False)
    nodes = TritonNode.objects.filter(cluster__in=list(idle)).exclude(health="down")
    node = nodes.exclude(http_url__in=serving.values("http_url")).first()
    if node is None:
        return None, (
            f"no smoke test: no idle {where} has a node that is not down and serves nothing "
            "in another cluster"
        )
    return node, ""


@dataclass(frozen=True)
class _Load:
    """One model the smoke loads: its name there, the config it is loaded with, its plan."""

    name: str
    config_json: str
    plan: push.LoadPlan
    version: ModelVersion
    temporary: bool = True  # False: under its own name (a model a BLS model calls by name)


# How deep the smoke follows models that call models.
_MAX_DEPTH = 8


def _graph(version: ModelVersion, depth: int = 0, *, as_itself: bool = False) -> list[_Load]:
    """What the smoke of `version` loads, what it calls first (each at the version a cluster
    would get: models_registry.selectors.step_version). The version under a temporary name
    (under its own with `as_itself`); an ensemble's steps under temporary names its config
    is rewritten to call; the models a BLS model declares under their own names, since its
    code calls them by name (the smoke node serves nothing else). ValueError when a call
    has no registered version."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"models calling models nested more than {_MAX_DEPTH} deep")
    ensemble = is_ensemble(version.config_json)
    loads: list[_Load] = []
    renamed: dict[str, str] = {}
    for step in model_calls(version.config_json):
        found = registry_selectors.step_version(step=step)
        if found is None:
            raise ValueError(
                f"its {'step' if ensemble else 'call'} {step} has no registered version"
            )
        if step.model not in renamed:
            below = _graph(found, depth + 1, as_itself=as_itself or not ensemble)
            loads += [load for load in below if load.name not in {seen.name for seen in loads}]
            renamed[step.model] = below[-1].name
    plan = push.build_plan([version], upload=True)
    name = (
        version.model.name
        if as_itself
        else temporary.smoke_name(version.model.name, version.version)
    )
    config = json.loads(plan.config_json)
    config["name"] = name
    for step in (config.get("ensemble_scheduling") or {}).get("step") or []:
        step["model_name"] = renamed.get(step.get("model_name"), step.get("model_name"))
    return [*loads, _Load(name, json.dumps(config), plan, version, temporary=not as_itself)]


def _unload_all(client, loaded: list[_Load]) -> None:
    """Unload what the smoke loaded, a caller before what it calls; one under its own name
    is waited for (the next smoke on the node may load it again, and Triton unloads in the
    background)."""
    for load in reversed(loaded):
        client.unload(load.name)
    for load in loaded:
        if not load.temporary:
            client.wait_unloaded(load.name)


def _inferences(client, name: str) -> int:
    """Requests `name` has executed (every loaded version, successes and failures)."""
    try:
        rows = client.statistics(name)
    except TritonError:
        return 0
    total = 0
    for row in rows:
        stats = row.get("inference_stats", {})
        total += int(stats.get("success", {}).get("count", 0))
        total += int(stats.get("fail", {}).get("count", 0))
    return total


def _answer(client, top: _Load, version: ModelVersion, sample: dict) -> dict:
    """The smoke inference's report fields: its latency and output shapes, or, for a
    decoupled model (it answers over a stream only), one generate stream read to its end:
    its time to first event, its events and what it asked (ValueError when it fails)."""
    if not is_decoupled(top.plan.config_dict):
        result = client.infer(top.name, sample, version=version.version)
        return {
            "latency_ms": round(result.latency_ms, 2),
            "output_shapes": {k: list(v.shape) for k, v in result.outputs.items()},
        }
    body = generate_body(sample)
    seen = stream_once(
        client.node, top.name, body, version=version.version,
        timeout_s=settings.SWITCHYARD_TRITON_TIMEOUT_S * 6,
    )  # fmt: skip
    if not seen.ok:
        raise ValueError(f"Its smoke stream failed: {seen.error}.")
    first = round(seen.first_s * 1000.0, 2) if seen.events else None
    return {
        "latency_ms": round(seen.total_s * 1000.0, 2),
        "stream": {"first_event_ms": first, "events": seen.events, "request": body},
        "output_shapes": {},
    }


@contextlib.contextmanager
def _node_held(node: TritonNode, loads: list[_Load]) -> Iterator[None]:
    """Models loaded under their own names: one such smoke per node at a time (two would
    replace each other's). Temporary names never meet."""
    if all(load.temporary for load in loads):
        yield
        return
    with locks.advisory_lock(locks.SMOKE_NODE, node.pk, wait=True):
        yield


def _run(node: TritonNode, version: ModelVersion) -> dict:
    loads = _graph(version)
    top = loads[-1]
    # A BLS model's direct calls: which of them its inference reaches is traced.
    traced = [] if is_ensemble(version.config_json) else model_calls(version.config_json)
    pid = child_serving(node.http_url)  # before the load: a dead node listens nowhere
    loaded: list[_Load] = []
    with _node_held(node, loads), push.client_for(node) as client:
        try:
            start = time.perf_counter()
            for load in loads:
                with _watching(client, pid, "load (its warm-up inference)"):
                    push.plan_load(client, load.plan, name=load.name, config_json=load.config_json)
                loaded.append(load)
            load_ms = (time.perf_counter() - start) * 1000
            sample = generate_inputs(top.plan.config_dict, limits=tensor_limits())
            before = {call.model: _inferences(client, call.model) for call in traced}
            with _watching(client, pid, "inference"):
                with own_traffic.counted(node, top.name, version.version, own_traffic.SMOKE):
                    answered = _answer(client, top, version, sample)
            after = {call.model: _inferences(client, call.model) for call in traced}
        except NodeLost:
            raise
        except TritonError as exc:
            _unload_all(client, loaded)
            if is_ensemble(version.config_json) or "Model '" not in str(exc):
                raise
            raise ValueError(
                f"{exc} (a model its code calls must be declared in its config's "
                f'parameters {{ key: "{CALLS_PARAMETER}" ... }} to be loaded beside it)'
            ) from None
        except BaseException:
            _unload_all(client, loaded)
            raise
        _unload_all(client, loaded)
    report = {
        "passed": True,
        "node": str(node),
        "load_ms": round(load_ms, 1),  # the steps' loads included
        "native_warmup": bool(top.plan.warmup_files),  # Triton ran it inside the load
        **answered,
    }
    if traced:  # the calls its inference reached: Triton's counters of each moved
        seen = [call.model for call in traced if after[call.model] > before[call.model]]
        report["calls"] = {
            "seen": seen,
            "unseen": [call.model for call in traced if call.model not in seen],
        }
    if len(loads) > 1:  # its answer through what it calls
        report["steps"] = [
            f"{load.version.model.name} v{load.version.version}" for load in loads[:-1]
        ]
    return report


@contextlib.contextmanager
def _watching(client, pid: int | None, stage: str) -> Iterator[None]:
    """NodeLost instead of the TritonError when the node no longer answers after it."""
    try:
        yield
    except TritonError:
        if client.is_live():
            raise
        how = (child_exit(pid) if pid is not None else None) or "connection lost"
        raise NodeLost(f"the node stopped answering during the smoke {stage} ({how})") from None


def model_version_smoke_validate(*, version_id: int) -> dict | None:
    """Smoke-test a version and record the outcome; without a smoke node, record why it was
    skipped and return None. A node lost during the smoke fails it and sends smoke_node_lost."""
    version = ModelVersion.objects.select_related("model").get(pk=version_id)
    node, why = smoke_node(version)
    if node is None:
        model_version_smoke_skip(version_id=version_id, reason=why)
        return None
    try:
        report = _run(node, version)
    except NodeLost as exc:
        report = {"passed": False, "node": str(node), "error": str(exc), "node_lost": True}
    except (TritonError, push.CorruptArtifact, ValueError) as exc:
        report = {"passed": False, "node": str(node), "error": str(exc)}
    _record(version_id, report)
    if report.get("node_lost"):
        log.warning("smoke of %s: %s: %s", version, node, report["error"])
        smoke_node_lost.send_robust(
            sender=ModelVersion, node=node, version=version, reason=report["error"]
        )
    return report


def _record(version_id: int, report: dict) -> None:
    with transaction.atomic():
        locked = ModelVersion.objects.select_for_update().get(pk=version_id)
        locked.validation = {**locked.validation, "smoke": report}
        locked.status = (
            ModelVersion.Status.SMOKE_PASSED
            if report["passed"]
            else ModelVersion.Status.SMOKE_FAILED
        )
        locked.save(update_fields=["validation", "status"])


def model_version_smoke_skip(*, version_id: int, reason: str) -> None:
    """Record in the version's validation report that its smoke test was skipped, and why;
    its status stays as it is (no test ran)."""
    with transaction.atomic():
        locked = ModelVersion.objects.select_for_update().filter(pk=version_id).first()
        if locked is None or locked.validation.get("smoke", {}).get("passed") is not None:
            return
        locked.validation = {**locked.validation, "smoke": {"skipped": True, "reason": reason}}
        locked.save(update_fields=["validation"])
