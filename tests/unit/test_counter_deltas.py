"""The one restart rule for counter deltas (integrations.triton.metrics.counter_deltas) and
the three places that use it: the collector's interval stats, the rollups and the release
observation. Pure code: no database, no Triton."""

import pytest

from integrations.triton.metrics import (
    ModelSeries,
    Snapshot,
    compute_interval,
    counter_deltas,
    series_deltas,
)
from releases import interval
from releases.observe import NodeView, live_counters
from telemetry.rollups import series_delta

CASES = [
    # (name, before, now, expected)
    (
        "growth",
        {"success": 10, "request_us": 500},
        {"success": 15, "request_us": 900},
        {"success": 5, "request_us": 400},
    ),
    ("no traffic", {"success": 10}, {"success": 10}, {"success": 0}),
    ("no earlier reading", None, {"success": 3}, None),
    (
        "restart from zero",
        {"success": 10, "request_us": 500},
        {"success": 2, "request_us": 80},
        None,
    ),
    (
        "one counter down is a restart",
        {"success": 10, "failure": 4},
        {"success": 30, "failure": 1},
        None,
    ),
    (
        "counter only in now is left out",
        {"success": 1},
        {"success": 2, "failure": 7},
        {"success": 1},
    ),
    (
        "counter only in before is left out",
        {"success": 1, "failure": 7},
        {"success": 2},
        {"success": 1},
    ),
    ("empty readings", {}, {}, {}),
]


@pytest.mark.parametrize(
    ("before", "now", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_counter_deltas_follows_the_restart_rule(before, now, expected):
    assert counter_deltas(before, now) == expected


def _series(success: float, failures: dict | None = None, request_us: float = 0.0):
    return ModelSeries(
        counters={"success": success, "request_us": request_us}, failures=failures or {}
    )


def test_a_failure_reason_that_went_down_drops_the_whole_series_interval():
    before = _series(10, {"REJECTED": 5, "OTHER": 1})
    now = _series(20, {"REJECTED": 0, "OTHER": 2})
    assert series_deltas(before, now) is None
    assert series_delta(before, now) is None
    assert series_deltas(None, now) is None
    assert series_deltas(before, _series(12, {"REJECTED": 6, "OTHER": 1})) == (
        {"success": 2, "request_us": 0},
        {"REJECTED": 1, "OTHER": 0},
    )


def test_collector_and_rollups_agree_on_a_restart():
    prev, cur = Snapshot(), Snapshot()
    prev.models[("m", "1")] = _series(100, {"OTHER": 4}, 1000)
    cur.models[("m", "1")] = _series(3, {"OTHER": 0}, 30)
    stats = compute_interval(prev, cur, 2.0)
    assert stats.models[0].status == "reset" and stats.models[0].request_rate is None
    assert series_delta(prev.models[("m", "1")], cur.models[("m", "1")]) is None


def _start(nodes: dict) -> dict:
    return {"at": 1.0, "log_offset": 0, "nodes": nodes}


def _reading(success: float, failure: float = 0.0) -> dict:
    return {"success": success, "failure": failure, "request_us": success * 1000, "queue_us": 0}


def test_release_observation_drops_a_restarted_node_instead_of_counting_from_zero():
    start = _start({"a": {"1": _reading(100, 1)}, "b": {"1": _reading(500, 0)}})
    # node a served 20 more; node b restarted and reads 7 successes, 3 failures since.
    now = _start({"a": {"1": _reading(120, 1)}, "b": {"1": _reading(7, 3)}})
    assert interval.delta(start, now["nodes"], "1") == {
        "success": 20.0,
        "failure": 0.0,
        "request_us": 20000.0,
        "queue_us": 0.0,
        "own_success": 0.0,  # read without own counters: none are taken off
        "own_failure": 0.0,
        "output_tokens": 0.0,  # a model that counts no tokens
    }


def test_release_observation_drops_a_node_missing_from_the_start_reading():
    start = _start({"a": {"1": _reading(100)}})
    now = _start({"a": {"1": _reading(110)}, "b": {"1": _reading(9000, 900)}})
    assert interval.delta(start, now["nodes"], "1")["success"] == 10.0
    assert interval.delta(start, now["nodes"], "1")["failure"] == 0.0


def test_after_a_restart_the_interval_counts_the_node_from_its_new_reading():
    start = _start({"a": {"1": _reading(100)}, "b": {"1": _reading(500)}})
    views = {
        "a": NodeView(True, counters={"1": _reading(120)}),
        "b": NodeView(True, counters={"1": _reading(7, 3)}),
        "c": NodeView(False),
    }
    rebased = interval.rebased(start, live_counters(views))
    assert rebased["nodes"]["a"] == start["nodes"]["a"]
    assert rebased["nodes"]["b"] == {"1": _reading(7, 3)}
    assert rebased["at"] == start["at"]
    # b climbs past its old start (600 > 500): only what it did since the restart counts.
    later = _start({"a": {"1": _reading(130)}, "b": {"1": _reading(600, 4)}})
    assert interval.delta(rebased, later["nodes"], "1")["success"] == 30.0 + 593.0
    assert interval.delta(rebased, later["nodes"], "1")["failure"] == 1.0
    assert start["nodes"]["b"] == {"1": _reading(500)}  # the stored start is not mutated


def test_nothing_dropped_leaves_the_start_as_it_was():
    start = _start({"a": {"1": _reading(100)}})
    assert (
        interval.rebased(start, live_counters({"a": NodeView(True, counters={"1": _reading(101)})}))
        is start
    )


def test_gpu_energy_counter_follows_the_same_rule():
    prev, cur = Snapshot(), Snapshot()
    prev.gpus["GPU-x"] = {"energy_consumption": 5000.0}
    cur.gpus["GPU-x"] = {"energy_consumption": 5400.0}
    assert compute_interval(prev, cur, 2.0).gpus[0].avg_power_w == 200.0
    cur.gpus["GPU-x"] = {"energy_consumption": 40.0}  # the node restarted
    assert compute_interval(prev, cur, 2.0).gpus[0].avg_power_w is None
    assert compute_interval(Snapshot(), cur, 2.0).gpus[0].avg_power_w is None
