"""The leak watch: memory samples around every load and unload the control plane performs
(`deployments.memory_watch`), and the rule that flags a node.

A cycle is one unload of a model on a node, measured from just before the latest load of
that model on that node to just after the unload. A node is flagged when, in each of its
last N cycles (SWITCHYARD_LEAK_CYCLES), memory after the unload was higher than before the
load, and together it rose by more than SWITCHYARD_LEAK_THRESHOLD_MIB: explicit loads and
unloads that never give memory back (a python model's native library, files a model leaves
in /dev/shm, an allocator that keeps freed pages). Each figure is judged on its own: the
host memory Triton reports (GPU memory added on GPU nodes), and for a node on this host
the server's RSS and the host's shared memory (integrations/triton/memory.py).
"""

import logging
import threading
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from deployments.models import TritonNode
from health.models import Alert, MemorySample
from health.services import Finding

log = logging.getLogger(__name__)
MIB = 1024 * 1024
REMEDY = (
    "What helps: run the node's tritonserver with tcmalloc or jemalloc preloaded "
    "(LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4 or libjemalloc.so.2), and roll "
    "a restart through the cluster's nodes (one at a time; reconcile reloads what each node "
    "must serve). Check the listed models for files they leave behind (e.g. in /dev/shm)."
)


def memory_sample_record(sender, *, node, model, operation, before, after, ok, **kwargs) -> None:
    """Keep one sample (the receiver of `node_operation_done`); runs in the push's thread."""
    try:
        MemorySample.objects.create(
            node_id=node.pk,
            # Only when already loaded: this thread must not read rows the caller's
            # transaction may still hold.
            cluster_name=node.cluster.name if TritonNode.cluster.is_cached(node) else "",
            node_name=node.name,
            model_name=model,
            operation=operation,
            before_host_bytes=_host(before),
            after_host_bytes=_host(after),
            before_rss_bytes=before.rss_bytes,
            after_rss_bytes=after.rss_bytes,
            before_gpu_bytes=before.gpu_bytes,
            after_gpu_bytes=after.gpu_bytes,
            before_shm_bytes=before.shm_bytes,
            after_shm_bytes=after.shm_bytes,
            ok=ok,
        )
    finally:
        if threading.current_thread() is not threading.main_thread():
            connection.close()  # a fan-out thread ends after this: leave no connection open


def _host(reading) -> int | None:
    if reading.host_bytes is None:
        return None
    return reading.host_bytes + (reading.gpu_bytes or 0)


@dataclass(frozen=True)
class Cycle:
    model: str
    before: dict[str, int | None]  # measure -> bytes just before the load
    after: dict[str, int | None]  # measure -> bytes just after the unload


MEASURES = ("host", "rss", "shm")


def _figures(sample, when: str) -> dict[str, int | None]:
    return {m: getattr(sample, f"{when}_{m}_bytes", None) for m in MEASURES}


def cycles_of(samples: list) -> list[Cycle]:
    """The node's cycles, oldest first, from its samples (oldest first)."""
    loads: dict[str, dict] = {}
    out = []
    for s in samples:
        if s.operation == MemorySample.Operation.LOAD:
            loads.setdefault(s.model_name, _figures(s, "before"))
            continue
        before = loads.pop(s.model_name, None) or _figures(s, "before")
        out.append(Cycle(s.model_name, before, _figures(s, "after")))
    return out


def leak_verdict(cycles: list[Cycle], n: int, threshold_bytes: int) -> dict | None:
    """{"measure", "rise_bytes", "from_bytes", "to_bytes", "models"} when the last `n`
    cycles leak by the module's rule, else None. Pure."""
    if n < 1 or len(cycles) < n:
        return None
    last = cycles[-n:]
    for measure in MEASURES:
        pairs = [(c.before.get(measure), c.after.get(measure)) for c in last]
        if any(b is None or a is None for b, a in pairs):
            continue
        if not all(a > b for b, a in pairs):
            continue
        rise = pairs[-1][1] - pairs[0][0]
        if rise > threshold_bytes:
            return {
                "measure": measure,
                "rise_bytes": rise,
                "from_bytes": pairs[0][0],
                "to_bytes": pairs[-1][1],
                "models": sorted({c.model for c in last}),
                "cycles": n,
            }
    return None


def _summary(node: TritonNode, verdict: dict) -> str:
    what = {"host": "host memory", "rss": "tritonserver RSS", "shm": "shared memory (/dev/shm)"}[
        verdict["measure"]
    ]
    return (
        f"{what} of {node} rose by {verdict['rise_bytes'] / MIB:.0f} MiB over its last "
        f"{verdict['cycles']} load/unload cycles and was never given back (models: "
        f"{', '.join(verdict['models'])})."
    )


def leak_findings(cluster) -> tuple[list[Finding], set[str]]:
    """Findings for the cluster's nodes, and the keys with no verdict (too few cycles)."""
    n = settings.SWITCHYARD_LEAK_CYCLES
    threshold = int(settings.SWITCHYARD_LEAK_THRESHOLD_MIB * MIB)
    firing, unknown = [], set()
    for node in cluster.nodes.all():
        recent = list(MemorySample.objects.filter(node_id=node.pk).order_by("-created_at")[: 6 * n])
        cycles = cycles_of(recent[::-1])
        finding = Finding(
            kind="leak_suspected", severity="warning", summary="", cluster=cluster, node=node.name
        )
        if len(cycles) < n:
            unknown.add(finding.key)
            continue
        verdict = leak_verdict(cycles, n, threshold)
        if verdict is not None:
            firing.append(
                Finding(
                    kind="leak_suspected",
                    severity="warning",
                    summary=_summary(node, verdict),
                    cluster=cluster,
                    node=node.name,
                    details={**verdict, "remedy": REMEDY},
                )
            )
        elif _still_high(node, recent, threshold):
            unknown.add(finding.key)  # memory not given back yet: the alert stays open
    return firing, unknown


def _still_high(node, recent: list, threshold: int) -> bool:
    """The newest reading is still well above where the flagged rise began."""
    alert = Alert.objects.filter(
        kind="leak_suspected", cluster=node.cluster, node_name=node.name, resolved_at=None
    ).first()
    if alert is None or not recent:
        return False
    measure, start = alert.details.get("measure"), alert.details.get("from_bytes")
    newest = getattr(recent[0], f"after_{measure}_bytes", None)
    return newest is not None and start is not None and newest > start + threshold / 2
