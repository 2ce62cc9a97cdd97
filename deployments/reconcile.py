"""Reconcile: make every node match the desired serving state, and say what drifted.

A node restarted in explicit mode comes back empty (Triton #3935): the desired versions are
loaded again. Versions Switchyard owns that should not be there are retired. Models pushed
by upload are not in the repository index, so what is loaded is read from /v2/models/stats.
An unreachable node is marked down once, not logged on every tick. Each pass also asks
every live node whether it answers model control without a key (`control_access`).
"""

from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from deployments import locks, push
from deployments.models import Deployment, DriftEvent, ServingState, TritonCluster, TritonNode
from deployments.selectors import node_control_access
from deployments.serving import serving_plan
from integrations.concurrency import fan_out
from integrations.triton.errors import TritonError


@dataclass
class Desired:
    model: str
    versions: list  # ModelVersion rows
    numbers: set[str] = field(default_factory=set)


@dataclass
class NodeReport:
    is_live: bool
    server_version: str = ""
    control_access: str = ""  # TritonNode.ControlAccess; "" keeps what is stored
    error: str = ""
    repairs: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, model, detail)


def _desired(cluster: TritonCluster) -> list[Desired]:
    busy = set(
        Deployment.objects.filter(
            cluster=cluster, status__in=[Deployment.Status.PENDING, Deployment.Status.RUNNING]
        ).values_list("model_id", flat=True)
    )
    states = (
        ServingState.objects.filter(cluster=cluster)
        .exclude(model_id__in=busy)
        .select_related("model")
        .prefetch_related("serving_versions__version__model")
    )
    out = []
    for state in states:
        versions = sorted(
            (sv.version for sv in state.serving_versions.all()), key=lambda v: v.version
        )
        out.append(Desired(state.model.name, versions, {str(v.version) for v in versions}))
    return out


def _repair(client, cluster: TritonCluster, node, want: Desired, loaded: set[str]):
    """One model on one node: (kind, detail) of what was done, or None when in sync."""
    if want.numbers and want.numbers - loaded:
        kind = DriftEvent.Kind.MISSING
        detail = f"missing v{', v'.join(sorted(want.numbers - loaded))}; loaded again"
    elif loaded - want.numbers:
        kind = DriftEvent.Kind.UNEXPECTED
        detail = f"v{', v'.join(sorted(loaded - want.numbers))} loaded but not desired; retired"
    else:
        return None
    if not want.versions:
        client.unload(want.model)
        return kind, detail
    plan = serving_plan(cluster, want.versions)
    outcome = push.apply_on_node(node, plan, warm_version=None)
    if not outcome.ok:
        return DriftEvent.Kind.REPAIR_FAILED, f"{detail} failed: {outcome.error}"
    return kind, detail


def _node_pass(cluster: TritonCluster, node, desired: list[Desired]) -> NodeReport:
    try:
        with push.client_for(node) as client:
            if not client.is_live():
                return NodeReport(is_live=False, error="does not answer /v2/health/live")
            report = NodeReport(
                is_live=True,
                server_version=client.server_metadata().version,
                control_access=node_control_access(node),
            )
            loaded = client.loaded_models()
            for want in desired:
                done = _repair(client, cluster, node, want, loaded.get(want.model, set()))
                if done:
                    report.repairs.append((done[0], want.model, done[1]))
            return report
    except (TritonError, push.CorruptArtifact) as exc:
        return NodeReport(is_live=False, error=str(exc))


def _record(cluster: TritonCluster, node: TritonNode, report: NodeReport) -> list[DriftEvent]:
    events = []
    with transaction.atomic():
        node = TritonNode.objects.select_for_update().get(pk=node.pk)
        if not report.is_live:
            if node.health != TritonNode.Health.DOWN:
                events.append(
                    DriftEvent(
                        cluster=cluster,
                        node=node,
                        node_name=node.name,
                        detail=report.error,
                        kind=DriftEvent.Kind.NODE_DOWN,
                    )
                )
            node.health, node.last_error = TritonNode.Health.DOWN, report.error
        else:
            if node.health == TritonNode.Health.DOWN:
                events.append(
                    DriftEvent(
                        cluster=cluster,
                        node=node,
                        node_name=node.name,
                        kind=DriftEvent.Kind.NODE_UP,
                    )
                )
            node.health, node.last_error = TritonNode.Health.UP, ""
            node.server_version, node.last_seen_at = report.server_version, timezone.now()
            node.control_access = report.control_access or node.control_access
        node.save(
            update_fields=[
                "health",
                "last_error",
                "server_version",
                "last_seen_at",
                "control_access",
            ]
        )
        events += [
            DriftEvent(
                cluster=cluster,
                node=node,
                node_name=node.name,
                kind=kind,
                model_name=model,
                detail=detail,
            )
            for kind, model, detail in report.repairs
        ]
        DriftEvent.objects.bulk_create(events)
    return events


def cluster_reconcile(*, cluster: TritonCluster) -> list[DriftEvent]:
    """One pass over every node at once; returns the drift events it recorded."""
    with locks.advisory_lock(locks.RECONCILE, cluster.pk) as taken:
        if not taken:
            return []  # another pass on this cluster is still running
        desired = _desired(cluster)
        nodes = list(cluster.nodes.all())
        reports = fan_out(nodes, lambda node: _node_pass(cluster, node, desired))
        return [event for node in nodes for event in _record(cluster, node, reports[node.pk])]
