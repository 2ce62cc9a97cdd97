"""What every node of a cluster answers (reachable, server version, loaded versions), read in
the background and kept in the shared cache, so the cluster page calls no node when viewed.

The beat task `deployments.cluster_status_refresh_all` reads every cluster each
SWITCHYARD_CLUSTER_STATUS_REFRESH_S, and a deployment reads its cluster again before it
finishes (the page shows what it changed as soon as it says so). The page combines the last
reading with the desired state and the node rows as they are now (`cluster_status_stored`);
a cluster with no reading yet, or one older than SWITCHYARD_CLUSTER_STATUS_STALE_S, has one
refresh queued by the page that finds it so.
"""

from __future__ import annotations

import logging
from datetime import datetime

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from core.shared import shared_value
from deployments import selectors
from deployments.models import TritonCluster

logger = logging.getLogger(__name__)
NOT_READ = {"reachable": False, "error": "not read yet", "loaded": {}, "health": "unknown"}


def _key(cluster_id: int) -> str:
    return f"deployments:cluster-status:{cluster_id}"


def cluster_status_refresh(*, cluster: TritonCluster) -> dict:
    """Ask every node of the cluster now (deployments.selectors.cluster_status) and store what
    each answered for the cluster page; never raises for a node or Redis that is down."""
    nodes = list(cluster.nodes.all())
    live = selectors.nodes_live_status(nodes)
    entry = {
        "checked_at": timezone.now().isoformat(),
        "nodes": {str(node.pk): live[node.pk] for node in nodes},
    }
    try:
        cache.set(_key(cluster.pk), entry, settings.SWITCHYARD_CLUSTER_STATUS_KEEP_S)
    except redis.RedisError:
        logger.warning("cluster %s: its node status was not stored (Redis is down)", cluster)
    return entry


def cluster_status_refresh_quietly(*, cluster: TritonCluster) -> None:
    """cluster_status_refresh for callers it must never fail (a deployment about to finish)."""
    try:
        cluster_status_refresh(cluster=cluster)
    except Exception:
        logger.exception("cluster %s: reading its nodes' status failed", cluster)


def _stored(cluster_id: int) -> dict | None:
    try:
        entry = cache.get(_key(cluster_id))
    except redis.RedisError:
        return None
    if isinstance(entry, dict) and isinstance(entry.get("nodes"), dict):
        return entry
    return None


def cluster_status_stored(*, cluster: TritonCluster) -> dict:
    """cluster_status's shape from the last stored reading, without calling any node: every
    node the cluster has now (one not read yet is `unknown`), drift against the desired state
    now, and `checked_at` (None before the first reading) and `is_stale`."""
    return _status_from(cluster, _stored(cluster.pk))


def _status_from(cluster: TritonCluster, entry: dict | None) -> dict:
    entry = entry or {"checked_at": None, "nodes": {}}
    checked_at = datetime.fromisoformat(entry["checked_at"]) if entry["checked_at"] else None
    nodes = list(cluster.nodes.all())
    live = {node.pk: entry["nodes"].get(str(node.pk)) or NOT_READ for node in nodes}
    status = selectors.status_of(cluster, nodes, live)
    age_s = (timezone.now() - checked_at).total_seconds() if checked_at else None
    is_stale = age_s is None or age_s > settings.SWITCHYARD_CLUSTER_STATUS_STALE_S
    return status | {"checked_at": checked_at, "is_stale": is_stale}


def _covers(entry: dict | None, node_ids: list[str], max_age_s: float) -> bool:
    if not entry or not entry.get("checked_at"):
        return False
    age_s = (timezone.now() - datetime.fromisoformat(entry["checked_at"])).total_seconds()
    return age_s <= max_age_s and all(pk in entry["nodes"] for pk in node_ids)


def cluster_status_read(*, cluster: TritonCluster, max_age_s: float) -> dict:
    """cluster_status_stored from a reading at most `max_age_s` old that covers every node of
    the cluster: the stored one (beat's, or a deployment's), else every node asked now.

    Asking the nodes is shared (core/shared.py): one caller at a time per cluster and set of
    nodes across every web process, the others given that reading, so however many clients
    ask, the nodes are asked at most about once per `max_age_s`. With Redis down each caller
    asks on its own (and the answer is still the nodes')."""
    node_ids = sorted(str(pk) for pk in cluster.nodes.values_list("pk", flat=True))
    entry = _stored(cluster.pk)
    if not _covers(entry, node_ids, max_age_s):
        key = f"{_key(cluster.pk)}:read:{'-'.join(node_ids)}"
        entry = shared_value(
            key,
            lambda: cluster_status_refresh(cluster=cluster),
            fresh_s=max_age_s,
            keep_s=max_age_s,
            # One reading asks every node at once, each within the node client's timeouts.
            lock_s=60.0,
            wait_s=30.0,
        )
    return _status_from(cluster, entry)


def cluster_status_refresh_request(*, cluster: TritonCluster) -> None:
    """Queue one refresh of the cluster's status (at most one per refresh interval, whoever
    asks); the broker being down only means the next beat pass reads it."""
    from deployments.tasks import cluster_status_refresh as refresh_task

    def send() -> None:
        try:
            refresh_task.delay(cluster.pk)
        except Exception:  # the broker out of reach: many types
            logger.warning("cluster %s: its status refresh was not queued", cluster)

    try:
        is_first = cache.add(
            f"{_key(cluster.pk)}:queued", 1, settings.SWITCHYARD_CLUSTER_STATUS_REFRESH_S
        )
    except redis.RedisError:
        return
    if is_first:
        transaction.on_commit(send)
