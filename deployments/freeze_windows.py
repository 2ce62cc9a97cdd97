"""Freeze windows as pure time arithmetic: when a window holds, and when it next begins.

A window is either dated (from `starts_at` to `ends_at`, aware datetimes) or weekly: on each
of its `weekdays` (0 = Monday) from `start` to `end`, local times in its IANA `timezone`; an
`end` at or before `start` runs into the next day (a night freeze, 22:00-06:00). Local times
are read in the window's own zone, so a freeze from 18:00 stays 18:00 across a daylight-saving
change. No ORM: deployments/freezes.py reads the rows and asks these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

LOOKAHEAD_DAYS = 14


@dataclass(frozen=True)
class Window:
    id: int
    reason: str
    cluster: str | None = None  # None: every cluster
    timezone: str = "UTC"
    starts_at: datetime | None = None  # dated
    ends_at: datetime | None = None
    weekdays: tuple[int, ...] = ()  # weekly
    start: time | None = None
    end: time | None = None

    @property
    def is_weekly(self) -> bool:
        return self.starts_at is None

    def applies_to(self, cluster: str) -> bool:
        return self.cluster is None or self.cluster == cluster


def _weekly_spans(window: Window, around: datetime, days: range):
    zone = ZoneInfo(window.timezone)
    local_day = around.astimezone(zone).date()
    for offset in days:
        day: date = local_day + timedelta(days=offset)
        if day.weekday() not in window.weekdays:
            continue
        begins = datetime.combine(day, window.start, tzinfo=zone)
        end_day = day if window.end > window.start else day + timedelta(days=1)
        yield begins, datetime.combine(end_day, window.end, tzinfo=zone)


def span_at(window: Window, now: datetime) -> tuple[datetime, datetime] | None:
    """(start, end) of the window's occurrence that holds at `now`, or None."""
    if not window.is_weekly:
        held = window.starts_at <= now < window.ends_at
        return (window.starts_at, window.ends_at) if held else None
    for begins, ends in _weekly_spans(window, now, range(-1, 1)):
        if begins <= now < ends:
            return begins, ends
    return None


def next_span(window: Window, now: datetime) -> tuple[datetime, datetime] | None:
    """(start, end) of the window's next occurrence beginning after `now`, within
    LOOKAHEAD_DAYS (None: none that soon, or a dated window that has passed)."""
    if not window.is_weekly:
        return (window.starts_at, window.ends_at) if window.starts_at > now else None
    for begins, ends in _weekly_spans(window, now, range(0, LOOKAHEAD_DAYS + 1)):
        if begins > now:
            return begins, ends
    return None


def frozen_until(
    windows: list[Window], cluster: str, now: datetime
) -> tuple[Window, datetime] | None:
    """The window freezing `cluster` at `now` that ends last, with its end; None: not frozen."""
    held = [(w, span[1]) for w in windows if w.applies_to(cluster) and (span := span_at(w, now))]
    return max(held, key=lambda pair: pair[1]) if held else None


def upcoming(windows: list[Window], cluster: str, now: datetime, limit: int = 5):
    """The next occurrences of windows on `cluster` (holding now first), soonest first:
    [(window, start, end)]."""
    found = []
    for window in windows:
        if not window.applies_to(cluster):
            continue
        span = span_at(window, now) or next_span(window, now)
        if span is not None:
            found.append((window, *span))
    return sorted(found, key=lambda item: item[1])[:limit]


def describe(window: Window, until: datetime) -> str:
    """'frozen until 2026-12-26 06:00 Europe/Berlin (Christmas change freeze)'."""
    local = until.astimezone(ZoneInfo(window.timezone))
    return f"frozen until {local:%Y-%m-%d %H:%M} {window.timezone} ({window.reason})"
