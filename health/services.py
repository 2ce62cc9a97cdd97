"""Alert writes: fire, resolve, acknowledge, and a detector's findings synced in one call.

Each write that changes an alert's lifecycle leaves an audit row whose action is
"alert.fired", "alert.resolved" or "alert.acknowledged", with the alert as its object and
`details` carrying alert_id, kind, severity, state, summary, cluster, node, model and
version: other apps (webhooks) read those rows as their outbox and never import health.
A finding seen again while its alert is open only refreshes that row (no audit row).
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.errors import ApplicationError
from audit.services import audit_record
from deployments.models import TritonCluster
from health.models import Alert

OPEN = [Alert.State.FIRING, Alert.State.ACKNOWLEDGED]


class AlertError(ApplicationError):
    """An alert action the caller can fix (404 no such alert, 409 already resolved)."""


@dataclass(frozen=True)
class Finding:
    """What a detector saw about one object; `key` deduplicates it."""

    kind: str
    severity: str
    summary: str
    cluster: TritonCluster | None = None
    node: str = ""
    model: str = ""
    version: int | None = None
    details: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return alert_key(self.kind, self.cluster, self.node, self.model, self.version)


def alert_key(kind: str, cluster, node: str = "", model: str = "", version=None) -> str:
    name = cluster.name if cluster is not None else ""
    return f"{kind}:{name}:{node}:{model}:{'' if version is None else version}"


def _audit(alert: Alert, action: str, actor=None) -> None:
    audit_record(
        actor=actor,
        action=action,
        obj=alert,
        details={
            "alert_id": alert.pk,
            "kind": alert.kind,
            "severity": alert.severity,
            "state": alert.state,
            "summary": alert.summary,
            "cluster": alert.cluster_name,
            "node": alert.node_name,
            "model": alert.model_name,
            "version": alert.version,
        },
    )


def alert_fire(*, finding: Finding) -> tuple[Alert, bool]:
    """The open alert of the finding's key, created (audited "alert.fired") when none is
    open, else refreshed; (alert, created). Safe against a concurrent fire of the same key."""
    try:
        with transaction.atomic():
            alert = (
                Alert.objects.select_for_update().filter(key=finding.key, state__in=OPEN).first()
            )
            if alert is not None:
                alert.summary, alert.details = finding.summary, finding.details
                alert.last_seen_at = timezone.now()
                alert.save(update_fields=["summary", "details", "last_seen_at"])
                return alert, False
            alert = Alert.objects.create(
                kind=finding.kind,
                key=finding.key,
                severity=finding.severity,
                cluster=finding.cluster,
                cluster_name=finding.cluster.name if finding.cluster else "",
                node_name=finding.node,
                model_name=finding.model,
                version=finding.version,
                summary=finding.summary,
                details=finding.details,
            )
            _audit(alert, "alert.fired")
            return alert, True
    except IntegrityError:  # another pass opened the same key first: that row is the alert
        return Alert.objects.get(key=finding.key, state__in=OPEN), False


def smoke_node_lost_alert(*, node, version, reason: str, **kwargs) -> Alert:
    """Fire a critical alert for a node that died during a version's smoke test."""
    finding = Finding(
        kind=Alert.Kind.SMOKE_NODE_LOST,
        severity=Alert.Severity.CRITICAL,
        summary=f"{node} died during the smoke test of {version.model.name} "
        f"v{version.version}: {reason}",
        cluster=node.cluster,
        node=node.name,
        model=version.model.name,
        version=version.version,
        details={"reason": reason},
    )
    return alert_fire(finding=finding)[0]


def plan_halted_alert(*, plan_id: int, model: str, version: int, summary: str) -> Alert:
    """Fire (or refresh) the warning that a release plan of `model` v`version` halted."""
    finding = Finding(
        kind=Alert.Kind.PLAN_HALTED, severity=Alert.Severity.WARNING, summary=summary,
        model=model, version=version, details={"plan_id": plan_id},
    )  # fmt: skip
    return alert_fire(finding=finding)[0]


def plan_halted_resolve(*, model: str, version: int, reason: str) -> Alert | None:
    """Resolve the open plan-halted alert of `model` v`version` (the plan went on or ended)."""
    key = alert_key(Alert.Kind.PLAN_HALTED, None, model=model, version=version)
    alert = Alert.objects.filter(key=key, state__in=OPEN).first()
    return alert_resolve(alert_id=alert.pk, reason=reason) if alert else None


def alert_resolve(*, alert_id: int, reason: str = "") -> Alert | None:
    """Resolve an open alert (audited "alert.resolved"); None when it was already resolved."""
    with transaction.atomic():
        alert = Alert.objects.select_for_update().filter(pk=alert_id, state__in=OPEN).first()
        if alert is None:
            return None
        alert.state, alert.resolved_at = Alert.State.RESOLVED, timezone.now()
        alert.details = {**alert.details, "resolved_because": reason} if reason else alert.details
        alert.save(update_fields=["state", "resolved_at", "details"])
        _audit(alert, "alert.resolved")
        return alert


def alert_acknowledge(*, alert_id: int, actor) -> Alert:
    """Mark a firing alert acknowledged by `actor` (audited "alert.acknowledged"); an
    acknowledged one is returned unchanged; a resolved one is refused (409)."""
    with transaction.atomic():
        alert = Alert.objects.select_for_update().filter(pk=alert_id).first()
        if alert is None:
            raise AlertError("No such alert.", status=404)
        if alert.state == Alert.State.RESOLVED:
            raise AlertError("This alert is resolved; there is nothing to acknowledge.", status=409)
        if alert.state == Alert.State.ACKNOWLEDGED:
            return alert
        alert.state, alert.acknowledged_at = Alert.State.ACKNOWLEDGED, timezone.now()
        alert.acknowledged_by = actor
        alert.save(update_fields=["state", "acknowledged_at", "acknowledged_by"])
        _audit(alert, "alert.acknowledged", actor=actor)
        return alert


def alerts_sync(
    *,
    kind: str,
    firing: Iterable[Finding],
    unknown: Iterable[str] = (),
    cluster: TritonCluster | None = None,
) -> dict[str, int]:
    """Fire every finding; resolve the open alerts of `kind` (on `cluster`, or anywhere when
    None) whose key is neither firing nor `unknown` (no verdict this pass: left as they are).
    Returns {"fired": new alerts, "resolved": n}."""
    firing = list(firing)
    fired = sum(alert_fire(finding=f)[1] for f in firing)
    keep = {f.key for f in firing} | set(unknown)
    open_alerts = Alert.objects.filter(kind=kind, state__in=OPEN)
    if cluster is not None:
        open_alerts = open_alerts.filter(cluster=cluster)
    resolved = 0
    for alert_id, key in open_alerts.values_list("pk", "key"):
        if key not in keep:
            resolved += alert_resolve(alert_id=alert_id, reason="no longer seen") is not None
    return {"fired": fired, "resolved": resolved}
