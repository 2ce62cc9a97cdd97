"""Reads of alerts and memory samples."""

from django.db.models import QuerySet

from health.models import Alert, MemorySample

OPEN_STATES = [Alert.State.FIRING, Alert.State.ACKNOWLEDGED]


def alert_list(
    *,
    state: str = "all",
    kind: str | None = None,
    severity: str | None = None,
    cluster: str | None = None,
    node: str | None = None,
    model: str | None = None,
) -> QuerySet[Alert]:
    """Alerts newest first. `state`: "firing" (every open alert, acknowledged or not),
    "acknowledged", "resolved" or "all"."""
    qs = Alert.objects.select_related("acknowledged_by")
    if state == "firing":
        qs = qs.filter(state__in=OPEN_STATES)
    elif state in (Alert.State.ACKNOWLEDGED, Alert.State.RESOLVED):
        qs = qs.filter(state=state)
    filters = {"kind": kind, "severity": severity, "cluster_name": cluster}
    filters |= {"node_name": node, "model_name": model}
    qs = qs.filter(**{k: v for k, v in filters.items() if v})
    return qs.order_by("-started_at", "-id")


def alert_get(*, alert_id: int) -> Alert | None:
    return Alert.objects.select_related("acknowledged_by").filter(pk=alert_id).first()


def alerts_unacknowledged_count() -> int:
    """How many alerts fire that nobody acknowledged yet (the menu's badge)."""
    return Alert.objects.filter(state=Alert.State.FIRING).count()


def alerts_open_about(
    *,
    cluster: str | None = None,
    node: str | None = None,
    model: str | None = None,
    models: list[str] | None = None,
) -> QuerySet[Alert]:
    """Open alerts of a cluster, a node of it, a model or any of `models` (any cluster),
    newest first."""
    qs = Alert.objects.filter(state__in=OPEN_STATES).select_related("acknowledged_by")
    if models is not None:
        qs = qs.filter(model_name__in=models)
    if cluster:
        qs = qs.filter(cluster_name=cluster)
    if node:
        qs = qs.filter(node_name=node)
    if model:
        qs = qs.filter(model_name=model)
    return qs.order_by("-started_at", "-id")


def memory_samples_of(*, node_id: int, limit: int = 50) -> list[MemorySample]:
    return list(MemorySample.objects.filter(node_id=node_id).order_by("-created_at")[:limit])
