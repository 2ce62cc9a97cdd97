"""One health pass of a cluster, every SWITCHYARD_PROBE_INTERVAL_S (beat `health-watch`):
probe every serving version on every node, read the traffic windows, judge, and sync each
kind of alert. Triton and the router are called outside any transaction; each alert write
is its own short one."""

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings

from deployments.locks import advisory_lock
from deployments.models import ServingVersion, TritonCluster
from health import checks, detect, leaks, remediation, traffic
from health.probes import Target, node_probes
from health.services import alerts_sync
from integrations.concurrency import fan_out
from releases.routing import access_log_path

log = logging.getLogger(__name__)
LOCK_NAMESPACE = 7310  # advisory lock key space of health passes, one per cluster


@dataclass
class PassReport:
    cluster: str
    skipped: bool = False
    probes: int = 0
    requests: int = 0
    fired: int = 0
    resolved: int = 0
    seconds: float = 0.0
    findings: dict[str, int] = field(default_factory=dict)


def serving_targets(cluster: TritonCluster) -> tuple[list[Target], dict[str, dict]]:
    """Every version that must serve on the cluster, and each model's SLA."""
    rows = ServingVersion.objects.filter(state__cluster=cluster).select_related("version__model")
    targets, slas = [], {}
    for row in rows:
        version = row.version
        slas[version.model.name] = version.model.sla
        targets.append(
            Target(
                version.model.name, version.version, version.pk, version.digest, version.config_json
            )
        )
    return sorted(targets, key=lambda t: (t.model, t.version)), slas


def _highest(targets: list[Target]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in targets:
        out[t.model] = max(out.get(t.model, 0), t.version)
    return out


def _traffic_findings(cluster, targets, slas, probes, nodes) -> dict[str, tuple]:
    window_s = settings.SWITCHYARD_HEALTH_WINDOW_S
    router = traffic.router_counts(access_log_path(cluster), _highest(targets), window_s)
    metrics = {n.pk: probes[n.name].metrics for n in nodes if probes[n.name].metrics}
    own = {n.pk: probes[n.name].own for n in nodes if probes[n.name].metrics}
    windows = traffic.windows(router, metrics, window_s, own)
    min_requests = settings.SWITCHYARD_HEALTH_MIN_REQUESTS
    default = settings.SWITCHYARD_HEALTH_MIN_SUCCESS_RATE
    silent, queue = [], []
    for t in targets:
        w, sla = windows.get((t.model, t.version)), slas[t.model]
        silent.append(
            detect.silent_failure(cluster, t, sla, w, min_requests=min_requests, default=default)
        )
        queue.append(detect.queue_over_sla(cluster, t, sla, w, min_requests=min_requests))
    return {"silent_failure": detect.split(silent), "queue_time_over_sla": detect.split(queue)}


def cluster_health_pass(*, cluster: TritonCluster) -> PassReport:
    """Probe, judge and sync the alerts of one cluster (skipped while another pass runs)."""
    report = PassReport(cluster.name)
    with advisory_lock(LOCK_NAMESPACE, cluster.pk) as taken:
        if not taken:
            report.skipped = True
            return report
        targets, slas = serving_targets(cluster)
        nodes = list(cluster.nodes.all())
        timeout_s = settings.SWITCHYARD_TRITON_TIMEOUT_S
        by_pk = fan_out(nodes, lambda n: node_probes(n, targets, timeout_s))
        probes = {n.name: by_pk[n.pk] for n in nodes}
        report.probes = sum(len(p.results) for p in probes.values())
        report.requests = sum(p.requests for p in probes.values())
        results = _traffic_findings(cluster, targets, slas, probes, nodes)
        results["probe_failed_while_ready"] = detect.probe_findings(cluster, targets, probes)
        results["node_down"] = (checks.node_down_findings(cluster), set())
        results["node_open"] = (checks.node_open_findings(cluster), set())
        results["drift_not_healed"] = (checks.drift_findings(cluster), set())
        results["leak_suspected"] = leaks.leak_findings(cluster)
        for kind, (firing, unknown) in results.items():
            outcome = alerts_sync(kind=kind, firing=firing, unknown=unknown, cluster=cluster)
            report.fired += outcome["fired"]
            report.resolved += outcome["resolved"]
            report.findings[kind] = len(firing)
        remediation.remediate(cluster, results["probe_failed_while_ready"][0], nodes)
    return report


def health_pass_all() -> list[PassReport]:
    """A pass of every cluster, then the alerts that span clusters (releases rolled back)."""
    reports = []
    for cluster in TritonCluster.objects.all():
        started = time.monotonic()
        try:
            reports.append(cluster_health_pass(cluster=cluster))
        except Exception:  # one cluster's failure must not leave the others unwatched
            log.exception("health pass of %s failed", cluster.name)
            continue
        reports[-1].seconds = round(time.monotonic() - started, 3)
    alerts_sync(kind="release_rolled_back", firing=checks.rolled_back_findings())
    return reports
