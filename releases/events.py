"""Release websocket groups, payload builders, and queueing ticks (one module per app)."""

import logging

import numpy as np
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from accounts.waits import notify_changed
from deployments.leases import BROKER_ERRORS

log = logging.getLogger(__name__)


def group(release_id: int) -> str:
    return f"release-{release_id}"


def queue_tick(release_id: int) -> None:
    """Tick the release now; with the broker out of reach, the beat's every-second tick of
    each active release does it once the broker is back (the request never fails for it)."""
    from releases.tasks import tick

    try:
        tick.delay(release_id)
    except BROKER_ERRORS as exc:
        log.warning("tick of release %s not queued, the beat queues one: %s", release_id, exc)


def release_payload(release) -> dict:
    """What a cockpit needs to redraw its header: phase, step, weight, reason."""
    return {
        "type": "release",
        "id": release.pk,
        "phase": release.phase,
        "step_index": release.step_index,
        "candidate_weight": release.candidate_weight,
        "router_weight": release.router_weight,
        "failed_checks": release.failed_checks,
        "inconclusive_checks": release.inconclusive_checks,
        "reason": release.reason,
        "pending_action": release.pending_action,
        "last_analysis": release.last_analysis,
    }


def analysis_payload(
    release, verdict, metrics: dict, now: float, started: float | None = None
) -> dict:
    """One interval's result: verdict, each check in words, both versions' numbers."""

    def numbers(m) -> dict:
        return {
            "requests": m.seen,
            "success_rate": m.success_rate,
            "avg_ms": m.avg_ms,
            "p99_ms": m.p99_ms,
            "queue_ms": m.queue_ms,
        }

    streams = {role: _stream_numbers(metrics, role) for role in ("baseline", "candidate")}
    return {
        "at": now,
        "seconds": None if started is None else round(now - started, 3),
        "step_index": release.step_index,
        "weight": release.candidate_weight,
        "result": verdict.result,
        "reason": verdict.reason,
        "checks": [
            {"name": c.name, "passed": c.passed, "text": c.text, "threshold": c.threshold}
            for c in verdict.checks
        ],
        "baseline": {**numbers(metrics["baseline"]), **streams["baseline"]},
        "candidate": {**numbers(metrics["candidate"]), **streams["candidate"]},
        # The interval's traffic that bypassed the router's split (releases/unrouted.py).
        "unrouted": metrics.get("unrouted"),
    }


def _stream_numbers(metrics: dict, role: str) -> dict:
    """A streaming model's interval figures of one version (none without streams): p95
    time to first token and p95 pace after it, from the router's log, and how many
    streams they rest on."""
    first = (metrics.get("first_token") or {}).get(role) or []
    if not first:
        return {}
    pace = (metrics.get("stream_pace") or {}).get(role) or []
    out = {
        "streams": len(first),
        "first_token_p95_ms": round(float(np.percentile(first, 95)), 3),
        "pace_p95_ms_per_kib": round(float(np.percentile(pace, 95)), 3) if pace else None,
    }
    tokens = (metrics.get("tokens") or {}).get(role)
    if tokens is not None and tokens.inter_token_ms:  # a model that counts its tokens
        out.update(
            tokens_per_stream=round(tokens.tokens_per_stream, 2),
            inter_token_p95_ms=round(float(np.percentile(tokens.inter_token_ms, 95)), 3),
            tokens_per_s_p50=round(float(np.percentile(tokens.tokens_per_s, 50)), 2),
            tokens_per_s_p5=round(float(np.percentile(tokens.tokens_per_s, 5)), 2),
            tokens_source=tokens.SOURCE,
        )
    return out


def publish(release_id: int) -> None:
    """Send the release's current state to its websocket group."""
    from releases.models import Release

    release = Release.objects.get(pk=release_id)
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(
            group(release_id), {"type": "release.event", "payload": release_payload(release)}
        )
    notify_changed("release", release_id, now=True)  # ?wait= on the release's detail
