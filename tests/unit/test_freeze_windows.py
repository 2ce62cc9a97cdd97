"""Freeze windows' time arithmetic (deployments/freeze_windows.py): dated and weekly windows,
nights across midnight, local times across a daylight-saving change, fleet-wide windows."""

from datetime import UTC, datetime, time

from deployments.freeze_windows import Window, describe, frozen_until, next_span, span_at, upcoming

BERLIN = "Europe/Berlin"


def utc(*parts) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_a_dated_window_holds_from_its_start_until_its_end():
    w = Window(1, "holidays", "prod", starts_at=utc(2026, 12, 24), ends_at=utc(2026, 12, 27))
    assert span_at(w, utc(2026, 12, 23, 23, 59)) is None
    assert span_at(w, utc(2026, 12, 24)) == (utc(2026, 12, 24), utc(2026, 12, 27))
    assert span_at(w, utc(2026, 12, 27)) is None  # the end is open
    assert next_span(w, utc(2026, 12, 1)) == (utc(2026, 12, 24), utc(2026, 12, 27))
    assert next_span(w, utc(2026, 12, 28)) is None


def test_a_weekly_night_freeze_runs_past_midnight_in_its_own_zone():
    # Monday to Friday nights, 22:00-06:00 in Berlin (UTC+1 in winter)
    w = Window(2, "nights", None, timezone=BERLIN, weekdays=(0, 1, 2, 3, 4),
               start=time(22), end=time(6))  # fmt: skip
    monday_night = utc(2026, 12, 7, 21, 30)  # 22:30 Berlin
    start, end = span_at(w, monday_night)
    assert (start, end) == (utc(2026, 12, 7, 21), utc(2026, 12, 8, 5))
    assert span_at(w, utc(2026, 12, 8, 4, 59)) is not None  # 05:59 Berlin, Tuesday
    assert span_at(w, utc(2026, 12, 8, 5)) is None
    assert span_at(w, utc(2026, 12, 12, 22)) is None  # Saturday night: not a weekday listed
    assert next_span(w, utc(2026, 12, 12, 12))[0] == utc(2026, 12, 14, 21)  # Monday 22:00


def test_local_times_hold_across_a_daylight_saving_change():
    w = Window(3, "evening", "prod", timezone=BERLIN, weekdays=(6,), start=time(18), end=time(20))
    before = span_at(w, utc(2026, 3, 22, 17, 30))  # a Sunday in winter: UTC+1
    after = span_at(w, utc(2026, 3, 29, 16, 30))  # the Sunday the clocks move: UTC+2
    assert before[0] == utc(2026, 3, 22, 17) and after[0] == utc(2026, 3, 29, 16)


def test_the_cluster_is_frozen_by_its_own_and_the_fleet_wide_windows_until_the_latest_end():
    own = Window(4, "deploy freeze", "prod", starts_at=utc(2026, 12, 1), ends_at=utc(2026, 12, 2))
    fleet = Window(5, "audit", None, starts_at=utc(2026, 12, 1), ends_at=utc(2026, 12, 3))
    other = Window(6, "eu only", "eu", starts_at=utc(2026, 11, 1), ends_at=utc(2027, 1, 1))
    window, until = frozen_until([own, fleet, other], "prod", utc(2026, 12, 1, 12))
    assert window is fleet and until == utc(2026, 12, 3)
    assert frozen_until([own, other], "prod", utc(2026, 12, 5)) is None
    assert describe(fleet, until) == "frozen until 2026-12-03 00:00 UTC (audit)"
    listed = upcoming([own, fleet, other], "prod", utc(2026, 11, 30))
    assert [w.id for w, _, _ in listed] == [4, 5]
