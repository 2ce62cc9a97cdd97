"""The rule that takes the control plane's own requests off Triton's counts (pure)."""

from deployments.own_traffic import parse
from telemetry.own_split import Own, own_deltas, split_interval
from telemetry.rollups import RollupRow


def own(successes=0.0, failures=0.0, origin="probe") -> Own:
    out = Own()
    out.add(origin, successes, failures)
    return out


def test_own_requests_come_off_tritons_counts_and_stay_in_their_origin():
    split = split_interval(10.0, 2.0, own(3.0, 1.0), Own())
    assert (split.requests, split.successes, split.failures) == (8.0, 7.0, 1.0)
    assert split.own.by_origin == {"probe": 4.0} and not split.is_inexact
    assert split.carry.requests == 0


def test_only_own_requests_leave_zero_client_requests():
    split = split_interval(2.0, 0.0, own(2.0), Own())
    assert split.requests == 0 and split.own.requests == 2 and not split.is_inexact


def test_an_own_request_counted_before_triton_is_carried_once_then_absorbed():
    early = split_interval(0.0, 0.0, own(1.0), Own())
    assert early.requests == 0 and early.carry.successes == 1 and not early.is_inexact
    later = split_interval(1.0, 0.0, Own(), early.carry)
    assert later.requests == 0 and not later.is_inexact and later.carry.requests == 0


def test_an_own_request_triton_never_counted_is_dropped_and_flags_the_row():
    early = split_interval(0.0, 0.0, own(0.0, 1.0), Own())
    later = split_interval(5.0, 0.0, Own(), early.carry)
    assert later.is_inexact
    assert later.successes == 5 and later.failures == 0  # clamped at 0, never guessed


def test_a_counter_reset_cannot_be_split_so_the_row_is_flagged_with_its_own_requests():
    split = split_interval(None, None, own(1.0, origin="warmup"), Own())
    assert split.is_inexact and split.requests == 0 and split.own.by_origin == {"warmup": 1.0}
    assert not split_interval(None, None, Own(), Own()).is_inexact  # nothing to split


def test_own_deltas_are_per_series_and_a_restarted_hash_counts_from_zero():
    before = parse({b"m\x1f1\x1fprobe\x1fsuccess": b"4", b"m\x1f1\x1fwarmup\x1fsuccess": b"1"})
    now = parse(
        {
            b"m\x1f1\x1fprobe\x1fsuccess": b"6",
            b"m\x1f1\x1fprobe\x1ffailure": b"1",
            b"m\x1f1\x1fwarmup\x1fsuccess": b"1",
            b"m\x1f2\x1fsmoke\x1fsuccess": b"2",
            b"bad field": b"9",
        }
    )
    deltas = own_deltas(before, now)
    assert deltas[("m", "1")].by_origin == {"probe": 3.0}
    assert (deltas[("m", "1")].successes, deltas[("m", "1")].failures) == (2.0, 1.0)
    assert deltas[("m", "2")].by_origin == {"smoke": 2.0}
    assert own_deltas(None, now) == {}  # a first reading is a baseline
    expired = own_deltas(now, parse({b"m\x1f1\x1fprobe\x1fsuccess": b"1"}))
    assert expired[("m", "1")].successes == 1.0


def test_a_rollup_row_adds_own_requests_per_origin_and_keeps_the_flag():
    row = RollupRow("c", "n", "m", "1", 0.0)
    row.add_own(own(2.0, 1.0), False)
    row.add_own(own(1.0, origin="warmup"), True)
    row.add_own(own(5.0, origin="unknown-origin"), False)
    assert (row.probe_requests, row.warmup_requests, row.own_successes) == (3, 1, 8)
    assert row.split_inexact
