"""The leak rule and the traffic judgements, pure (no services)."""

from types import SimpleNamespace

from deployments.own_traffic import parse
from health.detect import queue_over_sla, silent_failure
from health.leaks import Cycle, cycles_of, leak_verdict
from health.probes import Target
from health.services import Finding
from health.traffic import CounterHistory, RouterWindow, Window

MIB = 1024 * 1024
CLUSTER = SimpleNamespace(name="prod")
TARGET = Target("risk_score", 3, 1, "d", {})


def _cycles(rises_mib, model="leaky", start=1000):
    out, level = [], start * MIB
    for rise in rises_mib:
        out.append(Cycle(model, {"host": level, "rss": None}, {"host": level + rise * MIB}))
        level += rise * MIB
    return out


def test_memory_that_rises_every_cycle_past_the_threshold_is_flagged_with_its_models():
    verdict = leak_verdict(_cycles([0, 70, 70, 70, 70, 70]), 5, 256 * MIB)
    assert verdict["measure"] == "host" and verdict["rise_bytes"] == 350 * MIB
    assert verdict["models"] == ["leaky"]


def test_a_cycle_that_gives_memory_back_or_a_small_rise_is_not_a_leak():
    assert leak_verdict(_cycles([70, 70, -5, 70, 70]), 5, 256 * MIB) is None
    assert leak_verdict(_cycles([10, 10, 10, 10, 10]), 5, 256 * MIB) is None
    assert leak_verdict(_cycles([70, 70, 70, 70]), 5, 256 * MIB) is None  # too few cycles


def test_a_cycle_runs_from_before_the_load_to_after_the_unload():
    s = lambda op, m, b, a: SimpleNamespace(  # noqa: E731
        operation=op,
        model_name=m,
        before_host_bytes=b,
        after_host_bytes=a,
        before_rss_bytes=None,
        after_rss_bytes=None,
    )
    cycles = cycles_of(
        [s("load", "a", 100, 150), s("load", "a", 150, 160), s("unload", "a", 160, 120)]
    )
    none = {"rss": None, "shm": None}
    assert cycles == [Cycle("a", {"host": 100, **none}, {"host": 120, **none})]


def test_errors_the_router_saw_fire_even_when_triton_counted_none():
    w = Window(router_requests=40, router_errors=40, triton_success=40, triton_seen=True)
    finding = silent_failure(CLUSTER, TARGET, {}, w, min_requests=20, default=99.0)
    assert isinstance(finding, Finding) and finding.details["triton_failures"] == 0
    assert "100.0% of 40 requests failed at the router" in finding.summary


def test_too_little_traffic_gives_no_verdict_and_enough_good_traffic_is_healthy():
    few = Window(router_requests=5, router_errors=5)
    assert silent_failure(CLUSTER, TARGET, {}, few, min_requests=20, default=99.0) == (
        "silent_failure:prod::risk_score:3"
    )
    good = Window(router_requests=100, router_errors=1)
    assert silent_failure(CLUSTER, TARGET, {}, good, min_requests=20, default=99.0) is None
    # The model's SLA wins over the default: 99% is not enough for 99.5%.
    sla = {"min_success_rate": 99.5}
    strict = silent_failure(CLUSTER, TARGET, sla, good, min_requests=20, default=0.0)
    assert isinstance(strict, Finding) and strict.details["min_success_rate"] == 99.5


def test_queue_time_over_the_sla_fires():
    w = Window(triton_success=50, queue_us=50 * 30_000)
    finding = queue_over_sla(CLUSTER, TARGET, {"max_queue_ms": 10}, w, min_requests=20)
    assert isinstance(finding, Finding) and finding.details["queue_ms"] == 30.0
    assert queue_over_sla(CLUSTER, TARGET, {"max_queue_ms": 50}, w, min_requests=20) is None
    assert queue_over_sla(CLUSTER, TARGET, {}, w, min_requests=20) is None


def test_counter_window_follows_the_restart_rule():
    history = CounterHistory()
    line = 'nv_inference_request_success{{model="m",version="1"}} {}\n'
    history.add(0.0, line.format(10), 60)
    history.add(5.0, line.format(25), 60)
    assert history.deltas()[("m", 1)]["success"] == 15
    history.add(10.0, line.format(3), 60)  # the node restarted: no delta
    assert ("m", 1) not in history.deltas()


def test_router_window_reads_versioned_and_unversioned_requests(tmp_path):
    import json

    log = tmp_path / "access.log"
    lines = [
        {"ts": "100.0", "uri": "/v2/models/m/versions/2/infer", "status": "500", "model": ""},
        {"ts": "101.0", "uri": "/v2/models/m/infer", "status": "200", "model": ""},
        {"ts": "10.0", "uri": "/v2/models/m/infer", "status": "500", "model": ""},  # too old
        {"ts": "101.0", "uri": "/v2/health/ready", "status": "200", "model": ""},
        # Refused by the router (a GET of an infer path): it never reached Triton.
        {"ts": "102.0", "uri": "/v2/models/m/infer", "status": "403", "refused": "1"},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    window = RouterWindow(log)
    window.read(now=105.0, window_s=30.0)
    assert window.counts({"m": 2}) == {("m", 2): (2, 1)}


def test_memory_gauges_are_summed_over_gpus_and_a_fresh_servers_zero_is_no_reading():
    from integrations.triton.memory import gauges_from_text

    text = (
        "# TYPE nv_cpu_memory_used_bytes gauge\n"
        "nv_cpu_memory_used_bytes 1048576\n"
        'nv_gpu_memory_used_bytes{gpu_uuid="a"} 100\n'
        'nv_gpu_memory_used_bytes{gpu_uuid="b"} 50\n'
    )
    assert gauges_from_text(text) == {"host": 1048576, "gpu": 150}
    assert gauges_from_text("nv_cpu_memory_used_bytes 0\n") == {}


def test_counter_window_takes_the_control_planes_own_requests_off():
    history = CounterHistory()
    line = (
        'nv_inference_request_success{{model="m",version="1"}} {}\n'
        'nv_inference_request_failure{{model="m",version="1",reason="OTHER"}} {}\n'
    )
    own = "m\x1f1\x1fprobe\x1f{}"
    history.add(0.0, line.format(10, 0), 60, parse({own.format("success"): "2"}))
    history.add(
        5.0, line.format(14, 1), 60, parse({own.format("success"): "4", own.format("failure"): "1"})
    )
    grown = history.deltas()[("m", 1)]
    assert (grown["success"], grown["failure"], grown["own_success"]) == (2, 0, 2)
