"""Live traffic per model and version over a sliding window: what the router's access log
says clients got, and what Triton's counters say, on one cluster.

Both are kept in this process between passes. The router's log is tailed (each line read
once; a process that has not read it yet starts at most `_FIRST_READ_BYTES` from its end,
which covers any window worth judging); Triton's counters keep one reading per node and
pass, and a window's deltas follow the one restart rule (`counter_deltas`). The control
plane's own requests (this pass's probes among them) are read just before each node's metrics and
taken off Triton's success and failure counts (telemetry/own_split.py), so the window holds
what clients sent; queue times cover every request, so their average divides by both.

Requests the router did not route (no release active for the model) carry no version in
the log when the client asked for the unversioned URL: Triton answers those with its
highest READY version (docs/TRITON.md §versions), so they count under the highest version
the cluster serves.
"""

import re
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from integrations.routers.access_log import AccessLogTail, parse_line
from integrations.triton.metrics import counter_deltas, parse_metrics
from telemetry.own_split import own_deltas

_FIRST_READ_BYTES = 8 * 1024 * 1024
_INFER = re.compile(r"^/v2/models/([^/]+)(?:/versions/(\d+))?/infer$")
Key = tuple[str, int]  # (model, version)


@dataclass
class Window:
    """One (model, version) over the window: router requests and 5xx, Triton's counts."""

    router_requests: int = 0
    router_errors: int = 0
    triton_success: float = 0.0
    triton_failure: float = 0.0
    queue_us: float = 0.0
    triton_seen: bool = False
    own_success: float = 0.0  # the control plane's own successes, apart from Triton's above

    @property
    def triton_requests(self) -> int:
        return int(self.triton_success + self.triton_failure)


class RouterWindow:
    """The requests one router logged in the last `window_s` seconds, per (model, version)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        size = log.stat().st_size if log.exists() else 0
        self._tail = AccessLogTail(log, max(0, size - _FIRST_READ_BYTES))
        self._skip_partial = self._tail.offset > 0
        self.entries: deque[tuple[float, str, int | None, bool]] = deque()

    def read(self, now: float, window_s: float) -> None:
        if self.log.exists() and self.log.stat().st_size < self._tail.offset:
            self.__init__(self.log)  # rotated or truncated: start again
        lines = self._tail.read_lines()
        if self._skip_partial and lines:
            lines, self._skip_partial = lines[1:], False  # the first may start mid-line
        for line in lines:
            entry = parse_line(line)
            # A refused request (a GET of an infer path, say) never reached Triton.
            if entry is None or entry.refused or entry.ts < now - window_s:
                continue
            match = _INFER.match(entry.uri.split("?", 1)[0])
            if match is None:
                continue
            version = int(match.group(2)) if match.group(2) else entry.version
            self.entries.append((entry.ts, match.group(1), version, entry.is_error))
        while self.entries and self.entries[0][0] < now - window_s:
            self.entries.popleft()

    def counts(self, highest: dict[str, int]) -> dict[Key, tuple[int, int]]:
        """{(model, version): (requests, 5xx)}; unversioned ones under `highest[model]`."""
        out: dict[Key, tuple[int, int]] = {}
        for _, model, version, failed in self.entries:
            version = version if version is not None else highest.get(model)
            if version is None:
                continue
            requests, errors = out.get((model, version), (0, 0))
            out[(model, version)] = (requests + 1, errors + failed)
        return out


@dataclass
class CounterHistory:
    """One node's readings, oldest first: (time, {(model, version): counters}, own counts)."""

    readings: deque = field(default_factory=deque)

    def add(self, now: float, text: str, window_s: float, own: dict | None = None) -> None:
        self.readings.append((now, _series(text), own))
        while len(self.readings) > 2 and self.readings[1][0] <= now - window_s:
            self.readings.popleft()

    def deltas(self) -> dict[Key, dict[str, float]]:
        """Per series: growth from the oldest reading kept to the newest (restart rule)."""
        if len(self.readings) < 2:
            return {}
        (_, first, own_first), (_, last, own_last) = self.readings[0], self.readings[-1]
        own = own_deltas(own_first, own_last) if own_last is not None else {}
        out = {}
        for key, now in last.items():
            grown = counter_deltas(first.get(key), now)
            if grown is not None:
                mine = own.get((key[0], str(key[1])))
                if mine is not None:
                    grown["success"] = max(0.0, grown.get("success", 0.0) - mine.successes)
                    grown["failure"] = max(0.0, grown.get("failure", 0.0) - mine.failures)
                    grown["own_success"] = mine.successes
                out[key] = grown
        return out


def _series(text: str) -> dict[Key, dict[str, float]]:
    out = {}
    for (model, version), series in parse_metrics(text).models.items():
        if not str(version).isdigit():
            continue
        values = {k: series.counters.get(k, 0.0) for k in ("success", "queue_us")}
        values["failure"] = sum(series.failures.values())
        out[(model, int(version))] = values
    return out


_ROUTERS: dict[str, RouterWindow] = {}
_COUNTERS: dict[int, CounterHistory] = {}


def router_counts(
    log: Path | None, highest: dict[str, int], window_s: float, now: float | None = None
) -> dict[Key, tuple[int, int]]:
    """What the router at `log` saw in the window, per (model, version); {} without one."""
    if log is None or not log.exists():
        return {}
    window = _ROUTERS.get(str(log))
    if window is None:
        window = _ROUTERS[str(log)] = RouterWindow(log)
    window.read(time.time() if now is None else now, window_s)
    return window.counts(highest)


def windows(
    router: dict[Key, tuple[int, int]],
    metrics: dict[int, str],
    window_s: float,
    own: dict[int, dict | None] | None = None,
) -> dict[Key, Window]:
    """Router counts and each node's counter growth (keyed by node pk) over the window,
    less the control plane's own requests (`own`: each node's own-traffic counters)."""
    now = time.time()
    out: dict[Key, Window] = {}
    for node_pk, text in metrics.items():
        history = _COUNTERS.setdefault(node_pk, CounterHistory())
        history.add(now, text, window_s, (own or {}).get(node_pk))
        for key, grown in history.deltas().items():
            w = out.setdefault(key, Window())
            w.triton_seen = True
            w.triton_success += grown.get("success", 0.0)
            w.triton_failure += grown.get("failure", 0.0)
            w.queue_us += grown.get("queue_us", 0.0)
            w.own_success += grown.get("own_success", 0.0)
    for key, (requests, errors) in router.items():
        w = out.setdefault(key, Window())
        w.router_requests, w.router_errors = requests, errors
    return out
