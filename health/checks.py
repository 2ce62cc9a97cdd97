"""Findings from rows other apps already keep: nodes reconcile marked down or found open to
model control without a key, drift that reconcile failed to repair pass after pass, releases
that rolled back."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from deployments.models import DriftEvent, TritonCluster, TritonNode
from health.services import Finding
from releases.models import Release
from releases.state_machine import Phase

RECONCILE_PERIOD_S = 10.0  # the deployments-reconcile beat entry
ROLLED_BACK_HORIZON = timedelta(days=1)


def node_down_findings(cluster: TritonCluster) -> list[Finding]:
    return [
        Finding(
            kind="node_down",
            severity="critical",
            summary=f"Node {node} does not answer: {node.last_error or 'unreachable'}",
            cluster=cluster,
            node=node.name,
            details={"last_seen_at": node.last_seen_at.isoformat() if node.last_seen_at else None},
        )
        for node in cluster.nodes.filter(health=TritonNode.Health.DOWN)
    ]


def node_open_findings(cluster: TritonCluster) -> list[Finding]:
    """Nodes reconcile found answering model control without any key (`control_access`)."""
    return [
        Finding(
            kind="node_open",
            severity="warning",
            summary=node.warnings[0],
            cluster=cluster,
            node=node.name,
            details={"http_url": node.http_url},
        )
        for node in cluster.nodes.filter(control_access=TritonNode.ControlAccess.OPEN)
    ]


def drift_findings(cluster: TritonCluster) -> list[Finding]:
    """(node, model) pairs whose last SWITCHYARD_DRIFT_ALERT_PASSES repairs all failed, the
    latest one recently (reconcile still trying)."""
    passes = settings.SWITCHYARD_DRIFT_ALERT_PASSES
    recent = timezone.now() - timedelta(seconds=max(60.0, 3 * RECONCILE_PERIOD_S))
    events = DriftEvent.objects.filter(
        cluster=cluster,
        created_at__gte=timezone.now() - timedelta(hours=1),
        kind__in=[
            DriftEvent.Kind.MISSING,
            DriftEvent.Kind.UNEXPECTED,
            DriftEvent.Kind.REPAIR_FAILED,
        ],
    ).order_by("created_at", "id")
    streaks: dict[tuple[str, str], list[DriftEvent]] = {}
    for event in events:
        pair = (event.node_name, event.model_name)
        if event.kind == DriftEvent.Kind.REPAIR_FAILED:
            streaks.setdefault(pair, []).append(event)
        else:
            streaks.pop(pair, None)  # a repair that worked ends the streak
    return [
        Finding(
            kind="drift_not_healed",
            severity="warning",
            summary=(
                f"Reconcile failed {len(failed)} passes in a row to repair {model} on "
                f"{cluster.name}/{node}: {failed[-1].detail[:300]}"
            ),
            cluster=cluster,
            node=node,
            model=model,
            details={"failed_passes": len(failed)},
        )
        for (node, model), failed in streaks.items()
        if len(failed) >= passes and failed[-1].created_at >= recent
    ]


def rolled_back_findings() -> list[Finding]:
    """Releases that rolled back in the last day and no later release of that model on that
    cluster succeeded."""
    since = timezone.now() - ROLLED_BACK_HORIZON
    rolled = Release.objects.filter(
        phase=Phase.ROLLED_BACK.value, finished_at__gte=since
    ).select_related("cluster", "model", "candidate", "baseline")
    out = []
    for release in rolled:
        healed = Release.objects.filter(
            cluster=release.cluster,
            model=release.model,
            phase=Phase.SUCCEEDED.value,
            finished_at__gt=release.finished_at,
        ).exists()
        if healed:
            continue
        out.append(
            Finding(
                kind="release_rolled_back",
                severity="warning",
                summary=(
                    f"Release {release.pk} of {release.model.name} v{release.candidate.version} "
                    f"on {release.cluster.name} rolled back to v{release.baseline.version}: "
                    f"{release.reason[:300]}"
                ),
                cluster=release.cluster,
                model=release.model.name,
                version=release.candidate.version,
                details={"release_id": release.pk},
            )
        )
    return out
