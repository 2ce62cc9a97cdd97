"""Prices over time (docs/COSTS.md): the one way a node's or a cluster's price changes,
and the reads of the history costing charges from.

Every change is a PriceChange row in effect from the moment it is made, with who made it
and the values it replaced, and an audit event. A minute is charged the price in effect
when it ends, so a change applies to the minute it is made in and after, and never to a
complete minute: rebuilding closed hours gives them the price they were charged at.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from audit.services import audit_record
from deployments.models import PriceChange, TritonCluster, TritonNode

# What a node's price is made of, and a cluster's (the price of nodes without their own).
NODE_PRICE_FIELDS = ("hourly_cost", "gpu_hourly_cost", "gpu_count", "execution_slots")
CLUSTER_PRICE_FIELDS = ("node_hourly_cost",)
# A node or cluster priced before there was a history: its first price is from the epoch.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _fields(obj: TritonCluster | TritonNode) -> tuple[str, ...]:
    return NODE_PRICE_FIELDS if isinstance(obj, TritonNode) else CLUSTER_PRICE_FIELDS


def _where(obj: TritonCluster | TritonNode) -> dict[str, Any]:
    if isinstance(obj, TritonNode):
        return {"cluster_id": obj.cluster_id, "node_name": obj.name}
    return {"cluster_id": obj.pk, "node_name": ""}


def _plain(value) -> str | int | None:
    return str(value) if isinstance(value, Decimal) else value


def price_values(obj: TritonCluster | TritonNode) -> dict[str, str | int | None]:
    """The price fields of a node or cluster as JSON values (decimals as strings)."""
    return {f: _plain(getattr(obj, f)) for f in _fields(obj)}


def change_values(change: PriceChange) -> dict[str, str | int | None]:
    """What a price change set, as JSON values: a node's four fields or a cluster's price."""
    fields = NODE_PRICE_FIELDS if change.node_name else CLUSTER_PRICE_FIELDS
    return {f: _plain(getattr(change, f)) for f in fields}


def _record(obj, *, at: datetime, before: dict, actor) -> PriceChange:
    is_user = actor is not None and getattr(actor, "is_authenticated", False)
    return PriceChange.objects.create(
        **_where(obj),
        effective_at=at,
        before=before,
        changed_by=actor if is_user else None,
        changed_by_username=actor.get_username() if is_user else "",
        **{f: getattr(obj, f) for f in _fields(obj)},
    )


def price_history_start(*, obj: TritonCluster | TritonNode, actor) -> PriceChange:
    """Record the first price of a node or cluster just created, in effect from now (in the
    caller's transaction: it lands with the new row or not at all)."""
    return _record(obj, at=timezone.now(), before={}, actor=actor)


def price_change(*, obj: TritonCluster | TritonNode, actor, **values) -> PriceChange | None:
    """Set some price fields of a node or cluster; from this moment on its minutes cost the
    new price, the minutes before keep theirs. Audited (`node.price_changed`,
    `cluster.price_changed`) with before and after; None (nothing written) when no value
    differs. Fields not of its price raise ValueError."""
    unknown = set(values) - set(_fields(obj))
    if unknown:
        raise ValueError(f"Not a price field: {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        locked = type(obj).objects.select_for_update().get(pk=obj.pk)
        before = price_values(locked)
        if all(before[k] == _plain(v) for k, v in values.items()):
            return None
        if not PriceChange.objects.filter(**_where(locked)).exists():
            # Priced before the history began (written outside these services): its price
            # so far becomes its first entry, so the minutes before keep it.
            _record(locked, at=EPOCH, before={}, actor=None)
        for key, value in values.items():
            setattr(locked, key, value)
        locked.save(update_fields=list(values))
        change = _record(locked, at=timezone.now(), before=before, actor=actor)
        audit_record(
            actor=actor,
            action=f"{'node' if isinstance(obj, TritonNode) else 'cluster'}.price_changed",
            obj=locked,
            details={
                "before": before,
                "after": price_values(locked),
                "effective_at": change.effective_at.isoformat(),
            },
        )
    for key, value in values.items():
        setattr(obj, key, value)
    return change


def price_history(*, cluster: TritonCluster, node: str | None = None) -> QuerySet[PriceChange]:
    """A cluster's price changes and its nodes' (removed nodes' too), newest first; with
    `node` ('' for the cluster's own price), only those."""
    changes = PriceChange.objects.filter(cluster=cluster)
    if node is not None:
        changes = changes.filter(node_name=node)
    return changes.select_related("cluster").order_by("-effective_at", "-id")


def price_changes_before(*, until: datetime) -> QuerySet[PriceChange]:
    """Every price change made before `until`, oldest first (costing's input)."""
    return PriceChange.objects.filter(effective_at__lt=until).order_by("effective_at", "id")
