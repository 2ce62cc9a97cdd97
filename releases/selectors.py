"""Reads of releases."""

import math
import time
from dataclasses import asdict
from datetime import UTC, datetime

from django.conf import settings
from django.db.models import QuerySet, Sum

from accounts.errors import Refused
from accounts.pagination import filtered
from core.rows import only_shown
from integrations.routers.access_log import (
    last_lines,
    parse_line,
    refused_requests,
    router_counts,
)
from releases.configs import config_changes
from releases.inputs import ReleaseInputError
from releases.models import Release, ReleaseEvent
from releases.unrouted import UnroutedMeasure
from telemetry.models import Rollup

_RELATED = ("cluster", "model", "baseline", "candidate", "created_by")


def release_list(*, cluster=None, model=None, limit: int | None = 100) -> QuerySet[Release]:
    """Releases, newest first; the first `limit` (None: all, for a paginated API)."""
    qs = Release.objects.select_related(*_RELATED)
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    if model is not None:
        qs = qs.filter(model=model)
    return qs[:limit] if limit is not None else qs


def release_get(*, release_id: int, with_events: bool = True) -> Release | None:
    """One release; `with_events` prefetches its whole event log (the console's page)."""
    qs = Release.objects.select_related(*_RELATED)
    if with_events:
        qs = qs.prefetch_related("events")
    return qs.filter(pk=release_id).first()


def release_events(*, release: Release, kind: str = "") -> QuerySet[ReleaseEvent]:
    """A release's events, oldest first (optionally of one kind)."""
    qs = ReleaseEvent.objects.filter(release=release).order_by("created_at", "id")
    return qs.filter(kind=kind) if kind else qs


def release_recent_events(*, release: Release, limit: int, kind: str = "") -> list[ReleaseEvent]:
    """The latest `limit` events (of `kind`), oldest first."""
    newest = release_events(release=release, kind=kind).reverse()[:limit]
    return list(reversed(newest))


def router_view(*, cluster) -> dict:
    """What the cluster's router does now, for the cluster page: driver, whether it runs,
    which nodes it sends to, each route's split (from the running router itself) and the
    requests it refused as not inference over the recent window."""
    from deployments.validation import cluster_router
    from integrations.routers.settings import RouterSettingsError
    from releases.routing import router_for

    view = {"driver": "none", "listen": "", "running": False, "nodes": [], "routes": []}
    try:
        settings = cluster_router(cluster)
    except RouterSettingsError as exc:
        return view | {"error": f"{exc.field}: {exc.message}"}
    view["driver"] = settings.driver
    if view["driver"] != "nginx":
        return view
    view["listen"] = settings.listen
    view["grpc_listen"] = settings.grpc_listen
    live = router_for(cluster).current()
    routed = set(live.upstreams) if live is not None else set()
    view["running"] = live is not None
    view["nodes"] = [_routed_node(n, routed) for n in cluster.nodes.all()]
    for route in live.routes if live is not None else []:
        split = [{"version": v, "percent": w} for v, w in sorted(route.live_weights().items())]
        view["routes"].append({"model": route.model, "split": split})
    return view | router_refused_shared(cluster=cluster)


def router_refused_shared(*, cluster) -> dict:
    """router_refused_recent at most SWITCHYARD_ROUTER_REFUSED_CACHE_S old, read by one caller
    at a time for everyone (core/shared.py): the log's tail is not read per page view."""
    from core.shared import shared_value

    return shared_value(
        f"releases:router-refused:{cluster.pk}",
        lambda: router_refused_recent(cluster=cluster),
        fresh_s=settings.SWITCHYARD_ROUTER_REFUSED_CACHE_S,
    )


def router_refused_recent(*, cluster, now: float | None = None) -> dict:
    """Requests the cluster's router refused itself (not inference: repository, shared
    memory, trace, logging, statistics, config, unknown paths or methods) over the last
    SWITCHYARD_UNROUTED_WINDOW_S of its access log, read at most
    SWITCHYARD_UNROUTED_LOG_BYTES back; `refused_requests` is None when the log is not
    readable here."""
    from releases.routing import access_log_path

    window_s = settings.SWITCHYARD_UNROUTED_WINDOW_S
    log = access_log_path(cluster)
    if log is None or not log.exists():
        return {"refused_requests": None, "refused_window_s": window_s}
    lines, _ = last_lines(log, settings.SWITCHYARD_UNROUTED_LOG_BYTES)
    since = (time.time() if now is None else now) - window_s
    return {"refused_requests": refused_requests(lines, since), "refused_window_s": window_s}


def _routed_node(node, routed: set[str]) -> dict:
    """A node as the router panel shows it: routed or not, and why not in words."""
    from deployments.models import TritonNode
    from releases.routing import router_refusal

    refusal = router_refusal(node)
    if node.http_url in routed:
        why = ""
    elif refusal:
        why = f"left out: {refusal}"
    elif node.health == TritonNode.Health.DOWN:
        why = "down: rejoins once it is up with every serving version loaded"
    else:
        why = "joins once it is up with every serving version loaded"
    return {
        "name": node.name,
        "routed": node.http_url in routed,
        "why": why,
        "unusable": bool(refusal),
        "down": node.health == TritonNode.Health.DOWN,
    }


def active_releases_of(*, model) -> QuerySet[Release]:
    """A model's releases that have not ended, on any cluster."""
    from releases.state_machine import TERMINAL

    return (
        Release.objects.filter(model=model)
        .exclude(phase__in=[p.value for p in TERMINAL])
        .select_related("cluster")
    )


# What a list of releases shows of the objects it joins (the API's and the console's).
_LISTED = (
    "cluster__name",
    "cluster__router",
    "model__name",
    "baseline__version",
    "candidate__version",
    "created_by__username",
)


def release_list_filtered(**filters) -> QuerySet[Release]:
    """Releases newest first, narrowed by `accounts.pagination.filtered`'s filters; of the
    objects each joins, only what a list shows."""
    qs = only_shown(Release.objects.select_related(*_RELATED), *_LISTED)
    return filtered(qs, state_field="phase", **filters)


def release_running_list() -> QuerySet[Release]:
    """Releases that have not ended, oldest first (the release managers' home)."""
    from releases.state_machine import TERMINAL

    qs = Release.objects.select_related(*_RELATED).exclude(phase__in=[p.value for p in TERMINAL])
    return qs.order_by("created_at", "id")


def release_settings_rows(release: Release) -> list[tuple[str, str]]:
    """(setting, value) of everything the release judges by, defaults included: its steps,
    intervals, deadline, the SLA recorded at its start and every analysis knob (a release
    stored before the knobs were all recorded shows today's defaults for the missing ones)."""
    steps = ", ".join(
        f"{s.get('weight', 0):g}%{' (gate)' if s.get('manual_gate') else ''}"
        for s in release.steps or []
    )
    rows = [
        ("steps", steps),
        ("step_interval_s", f"{release.step_interval_s:g}"),
        ("progress_deadline_s", f"{release.progress_deadline_s:g}"),
        ("drain_s", f"{release.drain_s:g}"),
    ]
    rows += [(f"sla.{k}", str(v)) for k, v in sorted((release.sla or {}).items())]
    try:
        knobs = asdict(release.analysis_settings())
    except ReleaseInputError as exc:
        return [*rows, ("analysis", f"unusable: {exc}")]
    if knobs["interval_s"] is None:
        knobs["interval_s"] = release.step_interval_s
    rows += [
        (f"analysis.{k}", f"{v:g}" if isinstance(v, float) else str(v)) for k, v in knobs.items()
    ]
    return rows


def release_config_changes(release: Release) -> list[dict]:
    """Where the candidate's config serves differently from the baseline's, field by field
    ({path, baseline, candidate} as text): a config canary's reason to serve its candidate
    under a sibling name; [] for one config, or for stored configs that cannot be compared."""
    try:
        differences = config_changes(baseline=release.baseline, candidate=release.candidate)
    except Refused:
        return []
    return [
        {"path": d.path, "baseline": d.baseline_text, "candidate": d.candidate_text}
        for d in differences
    ]


def release_no_router_notice(release: Release) -> list[str]:
    """What a release on a cluster without a router does instead of weights, in sentences
    for its cockpit ([] on a routed cluster). Triton answers a model's unversioned requests
    with its highest READY version (docs/TRITON.md §versions), so the traffic moves when a
    version loads or unloads, not at a step."""
    from releases.routing import router_driver_name

    if router_driver_name(release.cluster) != "none":
        return []
    model, b, c = release.model.name, release.baseline.version, release.candidate.version
    url = f"/v2/models/{model}/versions/{{v}}/infer"
    lines = [
        f"No router on {release.cluster.name}: weights cannot be honoured while both versions "
        f"are loaded. Triton answers {model}'s unversioned requests with its highest READY "
        "version; requests to a version's own URL "
        f"({url.format(v=b)}, {url.format(v=c)}) reach that version."
    ]
    if c > b:
        return [
            *lines,
            f"v{c} takes all unversioned traffic on each node as soon as it is READY there "
            "(after Triton's warm-up), while the release still reads LOADING at 0%.",
            f"The gates and the fast guard judge v{c} from then on (its READY on every node "
            f"starts the step), mostly against the SLA: v{b} keeps only its versioned requests.",
            f"Rolling back unloads v{c}: unversioned traffic returns to v{b} once v{c} is "
            "unloaded, not before.",
        ]
    return [
        *lines,
        f"v{c} is older than v{b}, so v{b} keeps all unversioned traffic while both are "
        f"loaded; v{c} takes it only when the release succeeds and v{b} is unloaded.",
        f"Until then the gates judge v{c} on its versioned requests alone.",
        f"Rolling back unloads v{c}; v{b} never stops taking unversioned traffic.",
    ]


def unrouted_recent(
    *, cluster, models: list[str], now: float | None = None, via: dict | None = None
) -> dict[str, UnroutedMeasure]:
    """Each model's unrouted share over the last SWITCHYARD_UNROUTED_WINDOW_S: Triton's
    requests from the telemetry rollups (complete minutes, summed over nodes and versions)
    against the requests the router's access log shows for its HTTP split in those same
    minutes (releases/unrouted.py). `via` ({model: [ensembles calling it]}): the callers'
    split requests count as the model's (each runs it once, and a graph release splits
    them). {} for a cluster without an nginx router: with none, every client reaches
    Triton directly and a release is blue/green for all of them."""
    from releases.routing import access_log_path

    log = access_log_path(cluster)
    if log is None or not models:
        return {}
    now = time.time() if now is None else now
    since = math.floor((now - settings.SWITCHYARD_UNROUTED_WINDOW_S) / 60.0) * 60.0
    rows = (
        Rollup.objects.filter(
            cluster=cluster,
            model_name__in=models,
            minute__gte=datetime.fromtimestamp(since, tz=UTC),
        )
        .exclude(version="")
        .values("model_name", "minute")
        .annotate(requests=Sum("requests"))
    )
    minutes: dict[str, dict[float, int]] = {m: {} for m in models}
    for row in rows:
        minutes[row["model_name"]][row["minute"].timestamp()] = int(row["requests"] or 0)
    if not log.exists():
        why = "Not measured: the router's access log is not readable here (has it started?)."
        return {m: UnroutedMeasure(0, 0, None, why=why) for m in models}
    lines, whole = last_lines(log, settings.SWITCHYARD_UNROUTED_LOG_BYTES)
    covered = _log_covers_from(lines, whole)
    via = via or {}
    return {m: _unrouted_of(m, minutes[m], lines, covered, since, via.get(m, ())) for m in models}


def routed_rate(*, cluster, model: str, now: float | None = None) -> tuple[int, float] | None:
    """(requests, seconds): the model's requests through the router's HTTP split over the
    last SWITCHYARD_ROUTED_RATE_WINDOW_S, as its access log shows them (shorter when the log
    starts later: a router started or rotated since). None without a readable log or with
    under 10 s of it: nothing to say a rate from."""
    from releases.routing import access_log_path

    log = access_log_path(cluster)
    if log is None or not log.exists():
        return None
    now = time.time() if now is None else now
    lines, _whole = last_lines(log, settings.SWITCHYARD_UNROUTED_LOG_BYTES)
    first = next((e for e in map(parse_line, lines[:10]) if e is not None), None)
    if first is None:
        return None  # an empty log: a router just started, or one rotated
    start = max(now - settings.SWITCHYARD_ROUTED_RATE_WINDOW_S, first.ts)
    if now - start < 10.0:
        return None
    counts = router_counts(lines, keep=lambda ts: start <= ts <= now)
    return counts.split.get(model, 0), now - start


def _log_covers_from(lines: list[str], whole: bool) -> float:
    """The first minute the router's log covers: minutes before it are not compared (the
    router started, or its log was rotated, since; a read cut mid-log starts a minute late
    to count only whole ones). -inf for an empty whole log: nothing went through it."""
    first = next((e for e in map(parse_line, lines[:10]) if e is not None), None)
    if first is None:
        return -math.inf if whole else math.inf
    rounded = math.floor if whole else math.ceil
    return rounded(first.ts / 60.0) * 60.0


def _unrouted_of(
    model: str,
    minutes: dict[float, int],
    lines: list[str],
    covered: float,
    since: float,
    callers=(),
) -> UnroutedMeasure:
    kept = {m: n for m, n in minutes.items() if m >= covered}
    if not kept:
        why = (
            "Not measured: no telemetry for the model in the window the router's log covers "
            "(is the collector running?)."
        )
        return UnroutedMeasure(0, 0, None, window_start=since, why=why)
    counts = router_counts(lines, keep=lambda ts: math.floor(ts / 60.0) * 60.0 in kept)
    return UnroutedMeasure.of(
        sum(kept.values()),
        sum(counts.split.get(name, 0) for name in (model, *callers)),
        window_start=min(kept),
        window_end=max(kept) + 60.0,
        grpc_via_router=counts.grpc,
        versioned_via_router=counts.versioned.get(model, 0),
    )
