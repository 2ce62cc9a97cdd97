"""What a tick observes: candidate readiness, per-version traffic from every node's metrics
and from the router's access log, and in-flight work. Reads only; no database writes.

Counters are summed over nodes; the interval they are counted over, and the restart rule
applied to each node's deltas, are releases/interval.py's (pure). Next to Triton's counters
each version carries the control plane's own requests to the node (probes, warm-ups:
deployments/own_traffic.py), read right after the metrics, so an interval's requests are
the clients' (`interval.client_counts`).
"""

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import redis
from django.conf import settings

from deployments import own_traffic
from deployments.validation import node_urls_check
from integrations.concurrency import fan_out
from integrations.routers.access_log import (
    AccessLogTail,
    cut_streams,
    last_lines,
    parse_routed,
    percentile,
    stream_timing,
)
from integrations.triton.errors import TritonError
from integrations.triton.metrics import parse_metrics
from integrations.triton.probe import probe_model
from releases import interval
from releases.analysis import Metrics, token_figures
from releases.routing import access_log_path
from releases.unrouted import UnroutedMeasure


@dataclass
class NodeView:
    live: bool
    candidate_ready: bool = False
    candidate_loaded: bool = False
    counters: dict[str, dict[str, float]] = field(default_factory=dict)  # version -> counters
    pending: dict[str, float] = field(default_factory=dict)
    p99_ms: dict[str, float] = field(default_factory=dict)


def _counters(text: str, names: tuple[str, ...]) -> tuple[dict, dict, dict]:
    """The counters, pending requests and p99 of each version served under `names` (the
    model's name, and a config canary's sibling serving the candidate)."""
    snapshot = parse_metrics(text)
    counters, pending, p99 = {}, {}, {}
    for (name, version), series in snapshot.models.items():
        if name not in names:
            continue
        values = {k: series.counters.get(k, 0.0) for k in ("success", "request_us", "queue_us")}
        values["failure"] = sum(series.failures.values())
        if "output_tokens" in series.counters:  # a generative model counting its tokens
            values["output_tokens"] = series.counters["output_tokens"]
        counters[version], pending[version] = values, series.pending
        quantile = series.quantile("request", "0.99")
        if quantile is not None:
            p99[version] = quantile / 1000.0
    return counters, pending, p99


def _add_own(node, names: tuple[str, ...], counters: dict[str, dict[str, float]]) -> None:
    """Add the node's cumulative own successes and failures to each version's counters;
    without Redis they are left out, and the interval counts Triton's whole counts."""
    if not counters:
        return
    key = (node.cluster.name, node.name)
    try:
        own = own_traffic.own_counts_read([key])[key]
    except redis.RedisError:
        return
    for values in counters.values():
        values["own_success"] = values["own_failure"] = 0.0
    for (name, version, _origin), counts in own.items():
        if name in names and version in counters:
            counters[version]["own_success"] += counts.get("success", 0.0)
            counters[version]["own_failure"] += counts.get("failure", 0.0)


def node_view(
    node, model: str, candidate: int, served_as: str = "", callers: tuple = ()
) -> NodeView:
    """One node: readiness of the candidate (under `served_as`, its sibling name, when it
    has one; a graph release's `callers` (name, version) READY too) and the model's
    counters, the sibling's included; never raises. A node whose stored address is unusable
    or outside the allowed networks is not contacted."""
    if node_urls_check(http=node.http_url, grpc=node.grpc_url, metrics=node.metrics_url):
        return NodeView(False)
    names = (model, served_as) if served_as else (model,)
    try:
        seen = probe_model(
            node.http_url,
            served_as or model,
            candidate,
            metrics_url=node.metrics_url or None,
            timeout_s=settings.SWITCHYARD_TRITON_TIMEOUT_S,
        )
        counters, pending, p99 = _counters(seen.metrics, names) if seen.metrics else ({}, {}, {})
        _add_own(node, names, counters)
        ready = seen.ready and all(_ready(node, name, version) for name, version in callers)
        return NodeView(True, ready, str(candidate) in seen.loaded, counters, pending, p99)
    except (TritonError, ValueError):
        return NodeView(False)


def _ready(node, name: str, version: int) -> bool:
    timeout = settings.SWITCHYARD_TRITON_TIMEOUT_S
    return probe_model(node.http_url, name, version, timeout_s=timeout).ready


def nodes_view(
    cluster, model: str, candidate: int, served_as: str = "", callers: tuple = ()
) -> dict[str, NodeView]:
    nodes = list(cluster.nodes.all())
    views = fan_out(nodes, lambda n: node_view(n, model, candidate, served_as, callers))
    return {n.name: views[n.pk] for n in nodes}


def live_counters(views: dict[str, NodeView]) -> dict[str, dict[str, dict[str, float]]]:
    """{node: {version: counters}} of the nodes that answered."""
    return {name: v.counters for name, v in views.items() if v.live}


@dataclass(frozen=True)
class LogMark:
    """The clock and the router log's size, taken before the nodes' counters are read."""

    at: float
    log_offset: int


def log_mark(log: Path | None = None) -> LogMark:
    offset = log.stat().st_size if log is not None and log.exists() else 0
    return LogMark(time.time(), offset)


def counters_now(views: dict[str, NodeView], mark: LogMark) -> dict:
    """The reading an interval starts from (releases.interval.reading): the live nodes'
    counters in `views`, and the clock and log size of `mark`, taken before they were read:
    every request Triton counted after its reading is in the router's log after the mark."""
    return interval.reading(at=mark.at, log_offset=mark.log_offset, nodes=live_counters(views))


class RouterInterval:
    """What the router logged for one model since an analysis interval started, per version.

    Kept between ticks (see `_router_interval`): each tick parses only what nginx appended
    since the previous one and adds it to running counts, so a tick's cost does not grow
    with the interval's traffic.
    """

    def __init__(
        self,
        log: Path,
        offset: int,
        since: float,
        model: str,
        latency_since: float = 0.0,
        by: str = "version",
    ) -> None:
        # by="arm": a graph release's caller, counted per arm (the called model's version).
        self.log, self.since, self.model, self.by = log, since, model, by
        # Requests before it are counted, their latencies not (interval.latency_since).
        self.latency_since = latency_since
        self._tail = AccessLogTail(log, offset)
        self.requests: dict[int, int] = {}
        self.errors: dict[int, int] = {}
        self.latencies_ms: dict[int, list[float]] = {}  # every request
        self._ok_ms: dict[int, list[float]] = {}  # the requests that did not fail
        self._first_token_ms: dict[int, list[float]] = {}  # streams that did not fail
        self._asked: dict[int, list[int]] = {}  # their requests' bytes (prompt sizes)
        self._pace: dict[int, list[float]] = {}  # their ms per KiB after the first event
        self._stream_bytes: dict[int, list[int]] = {}  # their sizes
        self._paced: dict[int, list[tuple[float, int]]] = {}  # (pace, size) where paced
        self.cut: dict[int, int] = {}  # streams cut short by their node (the error log's)

    def read(self) -> "RouterInterval":
        if self.log.exists() and self.log.stat().st_size < self._tail.offset:
            # rotated: read it all again
            self.__init__(self.log, 0, self.since, self.model, self.latency_since, self.by)
        for line in self._tail.read_lines():
            routed = parse_routed(line, self.model, self.by)
            if routed is None or routed[1] < self.since:
                continue
            version, ts, request_time_s, failed = routed
            self.requests[version] = self.requests.get(version, 0) + 1
            self.errors[version] = self.errors.get(version, 0) + failed
            if ts < self.latency_since:
                continue
            latency = request_time_s * 1000.0
            self.latencies_ms.setdefault(version, []).append(latency)
            if not failed:
                self._ok_ms.setdefault(version, []).append(latency)
                timing = stream_timing(line)
                if timing is not None:
                    self._first_token_ms.setdefault(version, []).append(timing[0] * 1000.0)
                    self._asked.setdefault(version, []).append(timing.request_bytes)
                    self._stream_bytes.setdefault(version, []).append(timing.size)
                    if timing.pace is not None:
                        self._pace.setdefault(version, []).append(timing.pace)
                        self._paced.setdefault(version, []).append((timing.pace, timing.size))
        if self._first_token_ms or self.cut:  # a streaming model: its cut streams count too
            lines, _ = last_lines(self.log.with_name("error.log"), ERROR_LOG_BYTES)
            self.cut = cut_streams(lines, self.model, self.since)
        return self

    def first_token_ms(self, version: int) -> list[float]:
        """Time to first token of each stream of `version` that did not fail."""
        return list(self._first_token_ms.get(version, []))

    def prompt_sizes(self, version: int) -> list[int]:
        """The request bytes of each stream `first_token_ms` lists, in its order."""
        return list(self._asked.get(version, []))

    def stream_pace(self, version: int) -> list[float]:
        """Ms per KiB after the first event of each stream of `version` that did not fail."""
        return list(self._pace.get(version, []))

    def stream_bytes(self, version: int) -> list[int]:
        """Bytes of each stream of `version` that did not fail, as its client got them."""
        return list(self._stream_bytes.get(version, []))

    def paced_streams(self, version: int) -> list[tuple[float, int]]:
        """(pace, bytes) of each stream of `version` whose pace could be told."""
        return list(self._paced.get(version, []))

    def ok_latencies_ms(self, version: int) -> list[float]:
        return list(self._ok_ms.get(version, []))

    def p99_ms(self, version: int) -> float | None:
        values = self.latencies_ms.get(version)
        return percentile(values, 99.0) if values else None


# (log, offset and time where an interval started, model) -> what was read of it so far. A
# tick reads only what nginx appended since the previous tick in this process; another
# process (a different Celery worker) starts from the interval's offset and gets the same.
_INTERVALS: OrderedDict[tuple, RouterInterval] = OrderedDict()
_INTERVALS_KEPT = 16
# How much of the router's error log a streaming model's tick reads for cut streams.
ERROR_LOG_BYTES = 1 << 20


def _router_interval(
    log: Path | None, start: dict, model: str, latency_since: float, by: str = "version"
) -> RouterInterval | None:
    """The router's view of the interval that started at `start`, brought up to date."""
    if log is None or not log.exists() or not start.get("at"):
        return None
    offset = int(start.get("log_offset", 0))
    key = (str(log), offset, float(start["at"]), model, latency_since, by)
    seen = _INTERVALS.pop(key, None) or RouterInterval(log, *key[1:])
    _INTERVALS[key] = seen.read()
    while len(_INTERVALS) > _INTERVALS_KEPT:
        _INTERVALS.popitem(last=False)
    return seen


def interval_metrics(release, views: dict[str, NodeView], opened: dict) -> dict[str, Metrics]:
    """Baseline and candidate traffic since the interval `opened` started, from Triton and
    from the router; the router's latencies from `interval.latency_since` (a version with
    requests but none since has no p99 of the router's: none to compare)."""
    start = opened["start"]
    nodes = live_counters(views)
    log = access_log_path(release.cluster)
    router = _router_interval(log, start, release.model.name, interval.latency_since(opened))
    out: dict = {"latencies": {}, "first_token": {}, "stream_pace": {}, "tokens": {}}
    out.update(prompt_sizes={}, pace_sizes={})
    for role, version in (
        ("baseline", release.baseline.version),
        ("candidate", release.candidate.version),
    ):
        d = interval.delta(start, nodes, str(version))
        successes, failures = interval.client_counts(d)
        requests = int(successes + failures)
        p99s = [v.p99_ms[str(version)] for v in views.values() if str(version) in v.p99_ms]
        seen = router is not None and version in router.requests
        out["latencies"][role] = router.ok_latencies_ms(version) if router else []
        out["first_token"][role] = router.first_token_ms(version) if router else []
        out["stream_pace"][role] = router.stream_pace(version) if router else []
        out["prompt_sizes"][role] = router.prompt_sizes(version) if router else []
        out["pace_sizes"][role] = [s for _, s in router.paced_streams(version)] if router else []
        out["tokens"][role] = _tokens(router, version, d["output_tokens"], requests)
        # A decoupled model's request time in Triton ends when execute returns, before its
        # stream does (3-5 ms against 100+ for the example's: docs/TRITON.md): its streams
        # are judged on their first token and the time between tokens instead.
        streams = bool(out["first_token"][role])
        out[role] = Metrics(
            requests=requests,
            errors=int(failures),
            avg_ms=d["request_us"] / d["success"] / 1000.0
            if d["success"] and not streams
            else None,
            # The router's per-request latencies cover exactly this interval; Triton's
            # summary quantiles span a longer window (warm-up outliers linger there).
            p99_ms=(router.p99_ms(version) if seen else max(p99s) if p99s and requests else None),
            queue_ms=d["queue_us"] / d["success"] / 1000.0 if d["success"] else None,
            router_requests=router.requests[version] if seen else None,
            router_errors=router.errors[version] + router.cut.get(version, 0) if seen else None,
            p99_from="router" if seen else "triton",
            p99_samples=len(router.latencies_ms.get(version, [])) if seen else None,
        )
    # No router (blue/green for every client at once): nothing to go around. A graph
    # release's callers' split requests reach the model through them: routed too.
    via = _through_callers(release, opened)
    out["unrouted"] = (
        None
        if log is None
        else interval_unrouted(out, router is not None, since=start.get("at"), via=via)
    )
    return out


def _tokens(router: RouterInterval | None, version: int, tokens: float, requests: int):
    """The version's token figures (releases/analysis.py `token_figures`), None without the
    router's view or a token count."""
    if router is None:
        return None
    return token_figures(
        router.paced_streams(version), router.stream_bytes(version), tokens, requests
    )


def _through_callers(release, opened: dict) -> int:
    """A graph release's callers' routed requests over the interval, both arms."""
    return sum(
        arms[role].requests
        for arms in caller_metrics(release, opened).values()
        for role in ("baseline", "candidate")
    )


def caller_metrics(release, opened: dict) -> dict[str, dict]:
    """A graph release's callers over the interval `opened`, from the router alone (their
    requests through each arm: the baseline's, or the caller's sibling calling the
    candidate): {caller: {"baseline": Metrics, "candidate": Metrics, "latencies": {role:
    ms of each request that did not fail}}}."""
    log = access_log_path(release.cluster)
    out = {}
    for caller in release.callers or []:
        router = _router_interval(
            log, opened["start"], caller["model"], interval.latency_since(opened), by="arm"
        )
        if router is None:
            continue
        seen = {"latencies": {}}
        for role, version in (
            ("baseline", release.baseline.version),
            ("candidate", release.candidate.version),
        ):
            n = router.requests.get(version, 0)
            seen["latencies"][role] = router.ok_latencies_ms(version)
            seen[role] = Metrics(
                requests=n,
                errors=router.errors.get(version, 0) + router.cut.get(version, 0),
                p99_ms=router.p99_ms(version),
                router_requests=n,
                router_errors=router.errors.get(version, 0) + router.cut.get(version, 0),
                p99_from="router",
                p99_samples=len(router.latencies_ms.get(version, [])),
            )
        out[caller["model"]] = seen
    return out


def interval_unrouted(metrics: dict, has_log: bool, *, since: float | None, via: int = 0) -> dict:
    """The interval's unrouted share (releases/unrouted.py): Triton's requests of both
    versions against the requests the router's split sent them (`via`: those it sent
    through a graph release's callers); JSON, as stored."""
    if not has_log:
        why = "Not measured: the router's access log is not readable here."
        return UnroutedMeasure(0, 0, None, window_start=since, why=why).to_json()
    roles = [metrics["baseline"], metrics["candidate"]]
    return UnroutedMeasure.of(
        sum(m.requests for m in roles),
        sum(m.router_requests or 0 for m in roles) + via,
        window_start=since,
        window_end=time.time(),
    ).to_json()


def pending_requests(views: dict[str, NodeView], version: int) -> float:
    return sum(v.pending.get(str(version), 0.0) for v in views.values())
