"""The analysis interval's bookkeeping (releases/interval.py), without a database."""

from releases import interval

C = {"success": 10.0, "failure": 1.0, "request_us": 1000.0, "queue_us": 100.0}


def _more(counters: dict, by: float) -> dict:
    return {k: v + by for k, v in counters.items()}


def _start(nodes: dict, at: float = 100.0) -> dict:
    return interval.reading(at=at, log_offset=7, nodes=nodes)


def test_an_interval_opens_when_none_is_stored_or_the_step_or_weight_moved():
    mark = interval.marker(1, 25.0)
    ask = {"mark": mark, "now": 1000.0, "seconds": 30.0, "judging": True}
    assert interval.next_step(None, **ask) == "open"
    assert interval.next_step({}, **ask) == "open"
    assert interval.next_step({"marker": mark, "start": {}}, **ask) == "open"
    moved = interval.opened(interval.marker(0, 5.0), _start({}))
    assert interval.next_step(moved, **ask) == "open"
    reweighted = interval.opened(interval.marker(1, 50.0), _start({}))
    assert interval.next_step(reweighted, **ask) == "open"


def test_an_open_interval_is_watched_until_it_lasted_the_analysis_interval_then_judged():
    mark = interval.marker(1, 25.0)
    stored = interval.opened(mark, _start({}, at=100.0))
    ask = {"mark": mark, "seconds": 30.0, "judging": True}
    assert interval.next_step(stored, now=129.9, **ask) == "watch"
    assert interval.next_step(stored, now=130.0, **ask) == "judge"
    # Outside PROGRESSING no verdict is due, however long the interval ran.
    assert interval.next_step(stored, now=1e9, mark=mark, seconds=30.0, judging=False) == "watch"


def test_the_opened_interval_carries_its_marker_and_its_start_reading():
    start = _start({"n1": {"1": C}})
    stored = interval.opened(interval.marker(2, 50.0), start)
    assert stored == {"marker": [2, 50.0], "start": start, "carried": {}}
    assert start == {"at": 100.0, "log_offset": 7, "nodes": {"n1": {"1": C}}}


def test_the_guards_totals_carry_from_interval_to_interval():
    first = interval.opened(interval.marker(0, 5.0), _start({}))
    assert interval.totals(first, {}) == {"candidate": [0, 0], "baseline": [0, 0]}
    seen = {"candidate": (40, 3), "baseline": (760, 1)}
    carried = interval.totals(first, seen)
    second = interval.opened(interval.marker(1, 20.0), _start({}), carried)
    later = interval.totals(second, {"candidate": (10, 2), "baseline": (40, 0)})
    assert later == {"candidate": [50, 5], "baseline": [800, 1]}
    assert second["carried"] == {"candidate": [40, 3], "baseline": [760, 1]}  # not changed


def test_deltas_sum_the_nodes_and_drop_a_restarted_or_new_series():
    start = _start({"a": {"1": C}, "b": {"1": C}})
    now = {
        "a": {"1": _more(C, 5.0)},  # grew by 5 each
        "b": {"1": {k: v / 2 for k, v in C.items()}},  # went down: restarted, adds nothing
        "c": {"1": _more(C, 50.0)},  # not in the start reading: adds nothing
    }
    assert interval.delta(start, now, "1") == {k: 5.0 if k in C else 0.0 for k in interval.COUNTERS}
    assert interval.delta(start, now, "2") == dict.fromkeys(interval.COUNTERS, 0.0)


def test_rebased_moves_only_the_dropped_nodes_to_their_new_reading():
    start = _start({"a": {"1": C}, "b": {"1": C}})
    restarted = {k: v / 2 for k, v in C.items()}
    moved = interval.rebased(start, {"a": {"1": _more(C, 5.0)}, "b": {"1": restarted}})
    assert moved["at"] == start["at"] and moved["log_offset"] == start["log_offset"]
    assert moved["nodes"] == {"a": {"1": C}, "b": {"1": restarted}}
    assert start["nodes"]["b"]["1"] == C  # the stored start is not changed in place
    # Nothing dropped: the same reading comes back.
    assert interval.rebased(start, {"a": {"1": _more(C, 1.0)}}) is start


def test_client_counts_leave_the_control_planes_own_requests_out():
    grown = {"success": 10.0, "failure": 2.0, "own_success": 3.0, "own_failure": 4.0}
    assert interval.client_counts(grown) == (7.0, 0.0)  # clamped at 0, never negative
    start = _start({"a": {"1": {"success": 5.0, "failure": 0.0}}})  # read without Redis
    now = {"a": {"1": {"success": 9.0, "failure": 0.0, "own_success": 2.0, "own_failure": 0.0}}}
    assert interval.client_counts(interval.delta(start, now, "1")) == (4.0, 0.0)


def test_latencies_are_compared_from_when_the_router_served_the_intervals_weight():
    start = _start({}, at=100.0)
    # Opened by the tick that moved the weight: the router served it from 100.4.
    moved = interval.opened(interval.marker(2, 100.0), start, routed_at=100.4)
    assert interval.latency_since(moved) == 100.4
    # Opened after a verdict at the same weight: from its start.
    assert interval.latency_since(interval.opened(interval.marker(2, 100.0), start)) == 100.0
    # A routed_at before the start (a clock read earlier) is no later start.
    early = interval.opened(interval.marker(2, 100.0), start, routed_at=99.0)
    assert "routed_at" not in early and interval.latency_since(early) == 100.0
    # Rebasing a restarted node keeps it.
    rebased = {**moved, "start": interval.rebased(start, {})}
    assert interval.latency_since(rebased) == 100.4


def test_the_routers_interval_counts_every_request_and_times_those_after_the_switch(tmp_path):
    from releases.observe import RouterInterval

    log = tmp_path / "access.log"
    lines = [
        # (ts, version, request time s): two of the baseline's before the router switched
        # to 100 % at 100.5, the candidate's after (one slow, the reload's).
        (100.1, 1, 0.002),
        (100.2, 1, 0.002),
        (100.6, 2, 0.009),
        (100.7, 2, 0.003),
    ]
    log.write_text(
        "".join(
            f'{{"ts":"{ts}","status":"200","upstream_status":"200","request_time":"{s}",'
            f'"model":"m","version":"{v}"}}\n'
            for ts, v, s in lines
        )
    )
    seen = RouterInterval(log, 0, 100.0, "m", latency_since=100.5).read()
    assert seen.requests == {1: 2, 2: 2}
    assert seen.p99_ms(1) is None  # nothing of the baseline's at this weight to compare
    assert seen.ok_latencies_ms(2) == [9.0, 3.0]
    everything = RouterInterval(log, 0, 100.0, "m").read()
    assert everything.ok_latencies_ms(1) == [2.0, 2.0]
