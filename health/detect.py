"""Judging one pass: probe results and traffic windows against each model's SLA. Pure."""

from health.probes import NodeProbes, Target
from health.services import Finding, alert_key
from health.traffic import Window


def success_threshold(sla: dict, default: float) -> float:
    """The lowest success rate (%) the model accepts: its SLA's, else the default."""
    value = sla.get("min_success_rate")
    return float(value) if value is not None else default


def _failing_share(requests: int, errors: float, threshold_pct: float, min_requests: int):
    """The failed share (%) when there are enough requests and it breaks the threshold."""
    if requests < max(1, min_requests):
        return None
    failed = 100.0 * errors / requests
    return failed if 100.0 - failed < threshold_pct else None


def silent_failure(
    cluster, target: Target, sla: dict, w: Window | None, *, min_requests: int, default: float
) -> Finding | str | None:
    """A finding, the alert key when there is too little traffic to say, or None (healthy)."""
    key = alert_key("silent_failure", cluster, "", target.model, target.version)
    w = w or Window()
    threshold = success_threshold(sla, default)
    router = _failing_share(w.router_requests, w.router_errors, threshold, min_requests)
    triton = _failing_share(w.triton_requests, w.triton_failure, threshold, min_requests)
    if router is None and triton is None:
        enough = max(w.router_requests, w.triton_requests) >= max(1, min_requests)
        return None if enough else key
    where = (
        f"{router:.1f}% of {w.router_requests} requests failed at the router (5xx)"
        if router is not None
        else f"Triton counted {triton:.1f}% of {w.triton_requests} requests as failures"
    )
    return Finding(
        kind="silent_failure",
        severity="critical",
        summary=(
            f"{target.model} v{target.version} on {cluster.name}: {where}; the SLA accepts "
            f"{100.0 - threshold:.1f}%. Triton counted {int(w.triton_failure)} failures of "
            f"{w.triton_requests} requests."
        ),
        cluster=cluster,
        model=target.model,
        version=target.version,
        details={
            "router_requests": w.router_requests,
            "router_errors": w.router_errors,
            "triton_requests": w.triton_requests,
            "triton_failures": int(w.triton_failure),
            "min_success_rate": threshold,
        },
    )


def queue_over_sla(
    cluster, target: Target, sla: dict, w: Window | None, *, min_requests: int
) -> Finding | str | None:
    """Triton's average queue time over the window against the SLA's max_queue_ms."""
    key = alert_key("queue_time_over_sla", cluster, "", target.model, target.version)
    limit = sla.get("max_queue_ms")
    if limit is None:
        return None
    if w is None or w.triton_success < max(1, min_requests):
        return key
    queue_ms = w.queue_us / (w.triton_success + w.own_success) / 1000.0  # every request's
    if queue_ms <= float(limit):
        return None
    return Finding(
        kind="queue_time_over_sla",
        severity="warning",
        summary=(
            f"{target.model} v{target.version} on {cluster.name}: requests waited "
            f"{queue_ms:.1f} ms in Triton's queue on average (SLA {float(limit):g} ms)."
        ),
        cluster=cluster,
        model=target.model,
        version=target.version,
        details={"queue_ms": round(queue_ms, 2), "max_queue_ms": float(limit)},
    )


def probe_findings(
    cluster, targets: list[Target], probes: dict[str, NodeProbes]
) -> tuple[list[Finding], set[str]]:
    """Versions whose probe failed while the node said READY; unreachable nodes: unknown."""
    firing, unknown = [], set()
    for node_name, node in probes.items():
        for t in targets:
            key = alert_key("probe_failed_while_ready", cluster, node_name, t.model, t.version)
            result = node.results.get((t.model, t.version))
            if not node.live or result is None:
                unknown.add(key)
            elif result.ready and not result.ok:
                firing.append(
                    Finding(
                        kind="probe_failed_while_ready",
                        severity="critical",
                        summary=(
                            f"{t.model} v{t.version} is READY on {cluster.name}/{node_name} "
                            f"but its probe inference failed: {result.error[:300]}"
                        ),
                        cluster=cluster,
                        node=node_name,
                        model=t.model,
                        version=t.version,
                        details={"error": result.error[:1000]},
                    )
                )
    return firing, unknown


def split(results) -> tuple[list[Finding], set[str]]:
    """(findings, unknown keys) from a list of judge results."""
    firing = [r for r in results if isinstance(r, Finding)]
    return firing, {r for r in results if isinstance(r, str)}
