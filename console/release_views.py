"""Release pages: list, start form, and the cockpit (phase, steps, weight, gates, actions)."""

from datetime import UTC, datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from redis import RedisError

from accounts.errors import Refused
from accounts.roles import Role, user_has_role
from console.paging import api_filters, paged
from console.report_views import release_cost_context
from deployments.models import TritonCluster
from models_registry.selectors import version_choices, version_chosen
from releases import selectors
from releases.apis import ReleaseFilters
from releases.configs import ConfigsDiffer
from releases.guard_log import guard_samples_of
from releases.inputs import AnalysisSettings
from releases.services import ReleaseError, release_action, release_create
from releases.state_machine import ACTIONS, Phase
from releases.unrouted import UNPROTECTED, percent

# At most this many analysed intervals per cockpit chart (the latest ones), like the
# telemetry charts' budget per series (telemetry/resolution.py).
CHART_INTERVALS = 2000
# What cockpit.js reads of each side's measures (the rest of an analysis is for the table).
CHART_MEASURES = (
    "requests", "success_rate", "p99_ms", "queue_ms", "first_token_p95_ms", "pace_p95_ms_per_kib",
    "inter_token_p95_ms", "tokens_per_s_p5",
)  # fmt: skip

ACTION_LABELS = {
    "approve": "Approve next step",
    "pause": "Pause",
    "resume": "Resume",
    "promote": "Promote now",
    "rollback": "Roll back",
}


def _can_act(user) -> bool:
    return user_has_role(user, Role.RELEASE_MANAGERS.value)


def _release_or_404(release_id: int):
    release = selectors.release_get(release_id=release_id)
    if release is None:
        raise Http404(f"No release {release_id}.")
    return release


def _list_context(request) -> dict:
    """The releases, 50 a page, filtered like GET /api/v1/releases/ (model, cluster, state,
    since), and the start form."""
    filters, values, errors = api_filters(request, ReleaseFilters)
    listed = paged(request, selectors.release_list_filtered(**filters), values=values)
    return {
        **listed,
        "releases": listed["page"].object_list,
        "values": values,
        "errors": errors,
        "states": list(ReleaseFilters().fields["state"].choices),
        "can_act": _can_act(request.user),
        "clusters": TritonCluster.objects.all(),
        "versions": version_choices(),
        "unrouted_default_pct": f"{AnalysisSettings().max_unrouted_share * 100:g}",
    }


@login_required
def release_list(request):
    return render(request, "console/releases/list.html", _list_context(request))


def _configs_differ_page(request, exc: ConfigsDiffer):
    """The list and form again, the refusal above them with the differing fields as a table
    (a redirect's flash message could not carry the table)."""
    context = {**_list_context(request), "configs_differ": exc}
    return render(request, "console/releases/list.html", context, status=400)


@login_required
@require_POST
def release_start(request):
    if not _can_act(request.user):
        raise PermissionDenied("Starting a release needs the release-managers role.")
    post = request.POST
    cluster = TritonCluster.objects.filter(pk=post.get("cluster_id")).first()
    candidate = version_chosen(version_id=post.get("version_id", ""), typed=post.get("version", ""))
    if cluster is None or candidate is None:
        messages.error(request, "Choose a cluster and a candidate version (or type one: model vN).")
        return redirect("console:release-list")
    try:
        steps = [float(x) for x in post.get("steps", "5,25,50,100").split(",") if x.strip()]
        gates = [float(x) for x in post.get("manual_gates", "").split(",") if x.strip()]
        analysis = _unrouted_analysis(post.get("max_unrouted_pct", ""))
        release = release_create(
            cluster=cluster,
            candidate=candidate,
            actor=request.user,
            strategy=post.get("strategy", "canary"),
            steps=steps,
            manual_gates=gates,
            step_interval_s=float(post.get("step_interval_s") or 30),
            sticky_header=post.get("sticky_header", ""),
            analysis=analysis,
            confirm_unrouted=post.get("confirm_unrouted") == "on",
            shadow_s=float(post.get("shadow_s") or 0),
            shadow_share=float(post["shadow_share"]) if post.get("shadow_share") else None,
        )
    except ConfigsDiffer as exc:
        return _configs_differ_page(request, exc)
    except (ReleaseError, Refused, ValueError) as exc:
        messages.error(request, getattr(exc, "message", str(exc)))
        return redirect("console:release-list")
    return redirect("console:release-detail", release_id=release.pk)


def _unrouted_analysis(percent_text: str) -> dict | None:
    """The form's max unrouted share (a percentage) as the analysis knob; None when blank."""
    if not percent_text.strip():
        return None
    value = float(percent_text)
    if not 0.0 <= value <= 100.0:
        raise ValueError("Max unrouted share must be between 0 and 100 %.")
    return {"max_unrouted_share": value / 100.0}


def _consequence(release, action: str) -> str:
    """The sentence an action button shows before it runs."""
    nodes = release.cluster.nodes.count()
    c, b = f"v{release.candidate.version}", f"v{release.baseline.version}"
    w = f"{release.candidate_weight:g}%"
    return {
        "rollback": f"Roll back: candidate weight {w} → 0%, {c} unloaded from {nodes} nodes, "
        f"{b} keeps serving.",
        "promote": f"Promote now: candidate weight {w} → 100%, then {b} is retired from "
        f"{nodes} nodes and production moves to {c}.",
        "approve": "Approve: the next step starts and its weight is applied.",
        "pause": f"Pause: the weight stays at {w} and no step advances until resumed.",
        "resume": "Resume: analysis restarts and steps advance again.",
    }[action]


def _threshold(analysis: dict, check: str) -> float | None:
    return next(
        (c.get("threshold") for c in analysis.get("checks", []) if c["name"] == check), None
    )


def _guard_context(release) -> dict:
    """The fast guard's per-tick samples for its chart, and the latest one in words."""
    try:
        samples = guard_samples_of(release)
    except RedisError:  # the cache is out of reach: the copy its row keeps, a few ticks older
        samples = release.guard_samples or []
    if not samples:
        return {"guard": None}
    last = dict(samples[-1])
    last["when"] = datetime.fromtimestamp(last["at"], tz=UTC)
    return {
        "guard": {"count": len(samples), "last": last},
        "guard_samples": samples,
    }


def _unrouted_context(release) -> dict | None:
    """The traffic that bypassed the router's split: at the start and in the last judged
    interval (releases/unrouted.py), and the limit the start was held to, in percent."""
    start = release.unrouted_at_start or {}
    latest = (release.last_analysis or {}).get("unrouted") or {}
    if not start and not latest:
        return None
    limit = start.get("max_share")
    return {
        "start": start,
        "latest": latest,
        "limit": percent(limit) if isinstance(limit, int | float) else "",
        "warn": bool(start.get("over"))
        or (latest.get("share") or 0) > (limit if isinstance(limit, int | float) else 1),
    }


def _columns(measures: list[dict]) -> dict[str, list]:
    """One list per measure the charts draw, over the intervals; a measure no interval has
    (a stream's, for a model that does not stream) is left out: the chart draws no line."""
    columns = {k: [m.get(k) for m in measures] for k in CHART_MEASURES}
    return {k: column for k, column in columns.items() if any(v is not None for v in column)}


def _chart(release, analyses: list) -> dict:
    """What the cockpit's charts draw, per analysed interval: the latest CHART_INTERVALS, as
    columns (a day of minutes: 668 KB of the page as a dict per interval, 161 KB so)."""
    charted = analyses[-CHART_INTERVALS:]  # the charts' budget, as for telemetry charts
    at = [a.data.get("at") for a in charted]
    chart = {
        "intervals": len(analyses),
        "shown": len(charted),
        "t": [round(t, 3) if isinstance(t, int | float) else t for t in at],
        "baseline": _columns([a.data.get("baseline", {}) for a in charted]),
        "candidate": _columns([a.data.get("candidate", {}) for a in charted]),
        "weights": [a.data.get("weight") for a in charted],
        "seconds": [a.data.get("seconds") for a in charted],
        "results": [a.data.get("result") for a in charted],
        # The gate against the baseline at each interval, drawn next to the SLA.
        "limits": {
            metric: [_threshold(a.data, check) for a in charted]
            for metric, check in (
                ("p99_ms", "p99_vs_baseline"),
                ("success_rate", "success_vs_baseline"),
            )
        },
        "sla": release.sla,
        # A streaming model's intervals: time to first token and pace charts are drawn.
        "streams": any(a.data.get("candidate", {}).get("streams") for a in charted),
        # ... that counts its tokens: time between tokens and tokens a second too.
        "tokens": any(a.data.get("candidate", {}).get("tokens_per_s_p50") for a in charted),
    }
    for metric, check in (
        ("first_token_p95_ms", "ttft_p95_ms"),
        ("pace_p95_ms_per_kib", "pace_p95_ms_per_kib"),
        ("inter_token_p95_ms", "itl_p95_ms"),
    ):
        chart["limits"][metric] = [_threshold(a.data, check) for a in charted]
    limits = chart["limits"]  # a gate never judged draws no line
    chart["limits"] = {k: v for k, v in limits.items() if any(x is not None for x in v)}
    return chart


def _cockpit_context(request, release) -> dict:
    phase = Phase(release.phase)
    analyses = [e for e in release.events.all() if e.kind == "analysis"]
    actions = (
        [
            {"name": a, "label": ACTION_LABELS[a], "consequence": _consequence(release, a)}
            for a in ("approve", "pause", "resume", "promote", "rollback")
            if phase in ACTIONS[a]
        ]
        if _can_act(request.user) and not release.pending_action
        else []
    )
    chart = _chart(release, analyses)
    return {
        "release": release,
        **_guard_context(release),
        "unrouted": _unrouted_context(release),
        "unrouted_clients": UNPROTECTED,
        "steps": [
            {
                **s,
                "done": i < release.step_index or release.phase == "SUCCEEDED",
                "current": i == release.step_index and release.is_active,
            }
            for i, s in enumerate(release.steps)
        ],
        "analyses": list(reversed(analyses))[:30],
        "events": list(reversed([e for e in release.events.all() if e.kind != "analysis"]))[:60],
        "actions": actions,
        "chart": chart,
    }


@login_required
def release_detail(request, release_id):
    release = _release_or_404(release_id)
    context = {**_cockpit_context(request, release), **release_cost_context(release)}
    context["settings_rows"] = selectors.release_settings_rows(release)
    context["no_router_notice"] = selectors.release_no_router_notice(release)
    context["config_changes"] = selectors.release_config_changes(release)
    return render(request, "console/releases/cockpit.html", context)


@login_required
def release_live(request, release_id):
    """The cockpit's changing part, fetched again whenever /ws/releases/<id>/ says the
    release changed (and every few seconds only while that socket is down)."""
    release = _release_or_404(release_id)
    return render(request, "console/releases/_live.html", _cockpit_context(request, release))


@login_required
@require_POST
def release_act(request, release_id):
    if not _can_act(request.user):
        raise PermissionDenied("Release actions need the release-managers role.")
    release = _release_or_404(release_id)
    try:
        release_action(
            release=release,
            action=request.POST.get("action", ""),
            actor=request.user,
            reason=request.POST.get("reason", ""),
        )
    except ReleaseError as exc:
        messages.error(request, exc.message)
    return redirect("console:release-detail", release_id=release_id)
