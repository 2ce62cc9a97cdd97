"""The router's access log: the format nginx writes, a parser, a summary per version, a tail.

Release gates need what the router saw, not only Triton's counters: Triton counts a python
model's per-request error responses as successes (docs/TRITON.md §metrics), while the router
sees the HTTP status every client got. One JSON object per line (nginx `escape=json`).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

# name in the log line -> nginx variable. `sy_*` are set by the rendered config.
LOG_FIELDS: dict[str, str] = {
    "ts": "$msec",
    "time": "$time_iso8601",
    "method": "$request_method",
    "request_uri": "$request_uri",  # as the client sent it (unversioned for routed models)
    "uri": "$uri",  # after the router's rewrite (carries the chosen version)
    "status": "$status",
    "upstream_status": "$upstream_status",
    "request_time": "$request_time",
    "upstream_response_time": "$upstream_response_time",
    # Until the upstream's response header came: for a stream, about its first event.
    "upstream_header_time": "$upstream_header_time",
    "bytes_sent": "$body_bytes_sent",  # a stream's size: its events, as the client got them
    "request_length": "$request_length",  # the request's bytes (a prompt's size, roughly)
    "upstream_addr": "$upstream_addr",
    "model": "$sy_model",
    "version": "$sy_version",
    "sticky_key": "$sy_sticky",
    "request_id": "$request_id",
    "refused": "$sy_refused",  # "1" when nginx refused the request itself (allowlist.py)
    "mirror": "$sy_mirror",  # "1" for a shadow's copy of a request (its answer thrown away)
    # A caller's request in a graph release: the called model's version it went through.
    "arm": "$sy_arm",
}


def log_format() -> str:
    """The body of nginx's `log_format ... escape=json '<this>'` directive."""
    return "{" + ",".join(f'"{name}":"{var}"' for name, var in LOG_FIELDS.items()) + "}"


# A shadow's sampled copies (releases/agreement.py reads them): the client's request body as
# nginx kept it in memory ("" when it was too big for the buffer).
SAMPLE_FIELDS: dict[str, str] = {
    "ts": "$msec",
    "request_id": "$http_x_request_id",
    "model": "$sy_model",
    "version": "$sy_version",
    "body": "$request_body",
}


def sample_format() -> str:
    """The body of the samples log's `log_format ... escape=json` directive."""
    return "{" + ",".join(f'"{name}":"{var}"' for name, var in SAMPLE_FIELDS.items()) + "}"


@dataclass(frozen=True)
class AccessLogEntry:
    """One request as the router logged it."""

    ts: float  # epoch seconds when the log line was written
    method: str
    request_uri: str
    uri: str
    status: int
    upstream_status: str  # "200", "502, 200" after a retry, "" when no upstream was used
    request_time_s: float
    upstream_response_time: str
    upstream_addr: str
    model: str  # "" unless the request went through a route
    version: int | None
    sticky_key: str
    request_id: str
    refused: bool = False  # nginx refused it itself: not inference (allowlist.py)
    mirror: bool = False  # a shadow's copy of a client's request, sent to `version`

    @property
    def is_error(self) -> bool:
        """A server-side failure: nginx or the answering upstream returned 5xx, or a stream
        the upstream refused (`failed_stream`)."""
        return is_server_error(self.status, self.upstream_status) or failed_stream(
            self.uri, self.upstream_status
        )

    @property
    def is_client_error(self) -> bool:
        return 400 <= self.status < 500


def is_server_error(status: int, upstream_status: str) -> bool:
    """nginx or the upstream that answered last ("502, 200" after a retry) returned 5xx."""
    last_upstream = upstream_status.rsplit(",", 1)[-1].strip()
    return status >= 500 or (last_upstream.isdigit() and int(last_upstream) >= 500)


def failed_stream(uri: str, upstream_status: str) -> bool:
    """A `generate_stream` whose upstream answered 4xx: Triton answers a decoupled model's
    error as its first response with 400 and the error as the one event (measured on 2.51:
    docs/TRITON.md), so a stream refused by a failing candidate counts as failed, as its
    client sees it. (A bad request fails on both versions alike; an error after the first
    event goes out as an event of a 200 stream, which the router cannot see.)"""
    if not uri.endswith("/generate_stream"):
        return False
    last = upstream_status.rsplit(",", 1)[-1].strip()
    return last.isdigit() and 400 <= int(last) < 500


def parse_routed(
    line: str, model: str, by: str = "version"
) -> tuple[int, float, float, bool] | None:
    """(version, ts, request time in s, is_error) of one routed request to `model`, else None.
    A shadow's mirrored copy counts for the version it was sent to (the candidate's evidence
    while it only gets copies). `by="arm"`: the version is the line's arm (a caller's
    request in a graph release: the called model's version it went through); lines
    without one are skipped.

    The lean path for loops that read every line (release ticks): about half the cost of
    `parse_line`, and lines of other models are skipped before they are decoded.
    """
    if f'"model":"{model}"' not in line:
        return None
    try:
        raw = json.loads(line)
        version = raw.get(by) or ""
        if raw["model"] != model or not version.isdigit():
            return None
        status = int(raw["status"])
        upstream = raw.get("upstream_status", "")
        upstream = "" if upstream == "-" else upstream
        return (
            int(version),
            float(raw["ts"]),
            float(raw.get("request_time") or 0.0),
            is_server_error(status, upstream) or failed_stream(raw.get("uri", ""), upstream),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class StreamTiming(NamedTuple):
    first_s: float  # time to the first event
    pace: float | None  # ms per KiB of events after the first (None: too small to tell)
    size: int  # bytes of events the client got
    request_bytes: int = 0  # the request's size (its prompt's, roughly); 0 where not logged


def stream_timing(line: str) -> StreamTiming | None:
    """A routed `generate_stream` request's (time to its first event in s, then its pace: ms
    per KiB of events after the first, None for a stream too small to tell, and its size in
    bytes); None for any other line. The first event's time is the upstream's header time
    (Triton sends the header with the first event: docs/TRITON.md); the pace divides the
    rest of the stream's time by its size, so a candidate whose tokens come twice as slowly
    shows twice the pace for answers of the same length."""
    if "/generate_stream" not in line:
        return None
    try:
        raw = json.loads(line)
        if not str(raw.get("uri", "")).endswith("/generate_stream"):
            return None
        first = float(str(raw.get("upstream_header_time", "")).rsplit(",", 1)[-1].strip())
        size = int(raw.get("bytes_sent") or 0)
        rest_s = float(raw.get("request_time") or 0.0) - first
    except (ValueError, TypeError, AttributeError):
        return None
    pace = rest_s * 1000.0 / (size / 1024.0) if size >= 256 and rest_s > 0 else None
    asked = str(raw.get("request_length") or "0")
    return StreamTiming(first, pace, size, int(asked) if asked.isdigit() else 0)


def parse_line(line: str) -> AccessLogEntry | None:
    """One log line -> entry; None for a blank, truncated or foreign line."""
    try:
        raw = json.loads(line)
        version = raw.get("version", "")
        return AccessLogEntry(
            ts=float(raw["ts"]),
            method=raw.get("method", ""),
            request_uri=raw.get("request_uri", ""),
            uri=raw.get("uri", ""),
            status=int(raw["status"]),
            upstream_status=_dash_to_empty(raw.get("upstream_status", "")),
            request_time_s=float(raw.get("request_time") or 0.0),
            upstream_response_time=_dash_to_empty(raw.get("upstream_response_time", "")),
            upstream_addr=_dash_to_empty(raw.get("upstream_addr", "")),
            model=raw.get("model", ""),
            version=int(version) if str(version).isdigit() else None,
            sticky_key=raw.get("sticky_key", ""),
            request_id=raw.get("request_id", ""),
            refused=raw.get("refused") == "1",
            mirror=raw.get("mirror") == "1",
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def parse_lines(lines: Iterable[str]) -> list[AccessLogEntry]:
    """Every parseable line, in order; others are skipped."""
    return [entry for entry in map(parse_line, lines) if entry is not None]


def summarize(
    lines: Iterable[str], since: float | datetime | None = None
) -> dict[tuple[str, int], dict[str, float]]:
    """Routed requests per (model, version) since a time: counts, errors and latency in ms."""
    cutoff = since.timestamp() if isinstance(since, datetime) else since
    latencies: dict[tuple[str, int], list[float]] = {}
    summary: dict[tuple[str, int], dict[str, float]] = {}
    for entry in parse_lines(lines):
        if not entry.model or entry.version is None:
            continue
        if cutoff is not None and entry.ts < cutoff:
            continue
        key = (entry.model, entry.version)
        row = summary.setdefault(key, {"requests": 0, "errors": 0, "client_errors": 0})
        row["requests"] += 1
        row["errors"] += entry.is_error
        row["client_errors"] += entry.is_client_error
        latencies.setdefault(key, []).append(entry.request_time_s * 1000.0)
    for key, row in summary.items():
        row["latency_ms_avg"] = sum(latencies[key]) / len(latencies[key])
        row["latency_ms_p99"] = percentile(latencies[key], 99.0)
    return summary


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


# What a request's client asked for (request_uri, before any rewrite): the unversioned infer
# URL is what a release splits; a version in the URL, or gRPC, passes through unsplit.
_SPLIT_URI = re.compile(r"^/v2/models/([A-Za-z0-9_.-]+)/(?:infer|generate|generate_stream)$")
_VERSIONED_URI = re.compile(
    r"^/v2/models/([A-Za-z0-9_.-]+)/versions/\d+/(?:infer|generate|generate_stream)$"
)
GRPC_INFER = (
    "/inference.GRPCInferenceService/ModelInfer",
    "/inference.GRPCInferenceService/ModelStreamInfer",
)


@dataclass
class RouterCounts:
    """Inference requests the router logged, by what a release can do with them."""

    split: dict[str, int] = field(default_factory=dict)  # model -> unversioned HTTP infer
    versioned: dict[str, int] = field(default_factory=dict)  # model -> HTTP naming a version
    grpc: int = 0  # gRPC infer calls of every model (nginx cannot read which model)


def router_counts(
    lines: Iterable[str], keep: Callable[[float], bool] = lambda ts: True
) -> RouterCounts:
    """Count the inference requests among `lines` whose time `keep` accepts (pure)."""
    out = RouterCounts()
    for line in lines:
        low = line.lower()
        if "infer" not in low and "generate" not in low:
            continue
        ts = _line_ts(line)
        if not math.isnan(ts) and not keep(ts):
            continue  # most lines outside the window skip the JSON decode
        entry = parse_line(line)
        if entry is None or entry.refused or not keep(entry.ts):
            continue
        path = entry.request_uri.split("?", 1)[0]
        if entry.mirror and entry.model:  # a shadow's copy: the router sent it to Triton
            out.split[entry.model] = out.split.get(entry.model, 0) + 1
        elif path in GRPC_INFER:
            out.grpc += 1
        elif entry.method == "POST" and (match := _SPLIT_URI.match(path)):
            out.split[match.group(1)] = out.split.get(match.group(1), 0) + 1
        elif entry.method == "POST" and (match := _VERSIONED_URI.match(path)):
            out.versioned[match.group(1)] = out.versioned.get(match.group(1), 0) + 1
    return out


REFUSED_MARK = '"refused":"1"'


def refused_requests(lines: Iterable[str], since: float) -> int:
    """How many of `lines` nginx refused itself (allowlist.py) at or after `since` (pure).

    Lean like `parse_routed`: only lines that carry the mark are looked at."""
    count = 0
    for line in lines:
        if REFUSED_MARK not in line:
            continue
        ts = _line_ts(line)
        if math.isnan(ts):
            entry = parse_line(line)
            ts = entry.ts if entry is not None and entry.refused else -math.inf
        count += ts >= since
    return count


def _line_ts(line: str) -> float:
    """The time of a line as nginx writes it (`{"ts":"<msec>",...`) without decoding it;
    nan (kept, then judged on the decoded entry) for a line of another shape."""
    if line.startswith('{"ts":"'):
        with contextlib.suppress(ValueError):
            return float(line[7 : line.find('"', 7)])
    return math.nan


def last_lines(path: str | Path, max_bytes: int) -> tuple[list[str], bool]:
    """The complete lines of the log's last `max_bytes`, and whether they reach back to the
    file's start (False: older lines were left unread). ([], True) for a missing file."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return [], True
    if start > 0:
        data = data[data.find(b"\n") + 1 :]  # the first line may start mid-way
    end = data.rfind(b"\n") + 1
    return data[:end].decode("utf-8", errors="replace").splitlines(), start == 0


class AccessLogTail:
    """Reads the lines appended to a log since the last read (no rotation handling)."""

    def __init__(self, path: str | Path, offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset

    @classmethod
    def from_end(cls, path: str | Path) -> AccessLogTail:
        """A tail that skips everything already in the file."""
        path = Path(path)
        return cls(path, path.stat().st_size if path.exists() else 0)

    def read_lines(self) -> list[str]:
        """Complete new lines; a half-written last line waits for the next call."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        return data[:end].decode("utf-8", errors="replace").splitlines()


def _dash_to_empty(value: str) -> str:
    return "" if value == "-" else value


# nginx's error-log line for a stream its upstream cut short; the access log still says 200.
_CUT = re.compile(
    r"^(?P<at>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[error\] .*upstream prematurely closed "
    r'connection while reading upstream, .*request: "POST /v2/models/(?P<model>[A-Za-z0-9_.-]+)'
    r'/generate_stream HTTP/[\d.]+", upstream: "http://[^"]*/versions/(?P<version>\d+)'
    r'/generate_stream"'
)


def cut_streams(lines: Iterable[str], model: str, since: float) -> dict[int, int]:
    """{version: streams of `model` cut short by their node at or after `since`} from nginx's
    error log (its times are the router's local time, to the second, so a line in the
    second `since` falls in counts). A routed stream whose node closed the connection
    mid-stream is logged 200 in the access log (nginx 1.22, measured), so only these lines
    tell it failed."""
    out: dict[int, int] = {}
    floor = math.floor(since)
    for line in lines:
        if "prematurely" not in line:
            continue
        match = _CUT.match(line)
        if match is None or match["model"] != model:
            continue
        try:
            at = time.mktime(time.strptime(match["at"], "%Y/%m/%d %H:%M:%S"))
        except ValueError:
            continue
        if at >= floor:
            version = int(match["version"])
            out[version] = out.get(version, 0) + 1
    return out
