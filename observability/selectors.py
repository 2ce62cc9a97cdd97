"""Reads behind /metrics: aggregates over the rows the other apps keep, one query each.

Label values are names the operators chose (clusters, models, nodes) or fixed enums (phases,
statuses, drift kinds): bounded sets. Error texts never become labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum

from deployments.models import Deployment, DriftEvent, TritonNode
from health.models import Alert
from releases.models import Release, ReleaseEvent
from releases.state_machine import TERMINAL

# Push durations (seconds) worth telling apart: a python model loads in ~1 s, a large one
# in minutes; the default Celery limit of a push is 15 min.
DEPLOY_BUCKETS_S = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)


@dataclass(frozen=True)
class DurationHistogram:
    cluster: str
    buckets: list[tuple[float, int]]  # cumulative (upper bound, count), +Inf excluded
    count: int
    sum_s: float


def active_releases() -> list[dict]:
    """Every release not yet finished: id, cluster, model, phase, candidate weight (%)."""
    rows = Release.objects.exclude(phase__in=[p.value for p in TERMINAL]).values(
        "id", "cluster__name", "model__name", "phase", "candidate_weight"
    )
    return list(rows.order_by("id"))


def finished_release_counts() -> list[dict]:
    """Finished releases per cluster, model and final phase."""
    rows = Release.objects.filter(phase__in=[p.value for p in TERMINAL])
    return list(rows.values("cluster__name", "model__name", "phase").annotate(n=Count("id")))


def analysis_counts() -> list[dict]:
    """Interval analyses (the automatic gates) per cluster, model and result."""
    rows = ReleaseEvent.objects.filter(kind="analysis").values(
        "release__cluster__name", "release__model__name", result=F("data__result")
    )
    return list(rows.annotate(n=Count("id")))


def deployment_counts() -> list[dict]:
    """Deployments (pushes and unloads) per cluster, kind and status."""
    rows = Deployment.objects.values("cluster__name", "kind", "status")
    return list(rows.annotate(n=Count("id")))


def deployment_durations() -> list[DurationHistogram]:
    """Cumulative duration buckets of finished deployments, per cluster."""
    took = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    rows = (
        Deployment.objects.filter(started_at__isnull=False, finished_at__isnull=False)
        .annotate(took=took)
        .values("cluster__name")
        .annotate(
            n=Count("id"),
            total=Sum("took"),
            **{
                f"le{i}": Count("id", filter=Q(took__lte=timedelta(seconds=bound)))
                for i, bound in enumerate(DEPLOY_BUCKETS_S)
            },
        )
    )
    return [
        DurationHistogram(
            cluster=row["cluster__name"],
            buckets=[(b, row[f"le{i}"]) for i, b in enumerate(DEPLOY_BUCKETS_S)],
            count=row["n"],
            sum_s=row["total"].total_seconds() if row["total"] else 0.0,
        )
        for row in rows
    ]


def drift_counts() -> list[dict]:
    """Reconcile's drift events per cluster and kind."""
    return list(DriftEvent.objects.values("cluster__name", "kind").annotate(n=Count("id")))


def node_states() -> list[dict]:
    """Every node: cluster, name, health and when reconcile last reached it."""
    rows = TritonNode.objects.values("cluster__name", "name", "health", "last_seen_at")
    return list(rows.order_by("cluster__name", "name"))


def open_alert_counts() -> list[dict]:
    """Open alerts (firing or acknowledged) per kind, severity and state."""
    rows = Alert.objects.exclude(state=Alert.State.RESOLVED).values("kind", "severity", "state")
    return list(rows.annotate(n=Count("id")))
