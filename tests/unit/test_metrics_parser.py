"""The metrics parser and interval maths, on real captures (tests/fixtures/metrics/)."""

import json
import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from integrations.triton.metrics import READ_FAMILIES, compute_interval, parse_metrics

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"
CAPTURES = sorted(p.name for p in FIXTURES.glob("*.txt"))
GPU_A = "GPU-c06b1f2e-9d4a-4b7e-8a51-3f0e2d1c8844"
GPU_B = "GPU-5e2a7c11-0b3d-4f6e-9c2a-71d8e4b09a13"
TAGS = {"_note": 'says "hi", then \\ leaves', "_team": "fraud"}


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def reference_samples(text: str) -> list[tuple]:
    """Every sample of the families we read, as prometheus_client's parser sees them."""
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if family.type == "counter" and name == family.name + "_total":
                # the reference renames counters to OpenMetrics style; a counter written
                # with its `_total` (the vLLM backend's token counters) keeps it
                name = family.name if family.name in READ_FAMILIES else name
            if name in READ_FAMILIES:
                out.append((name, sample.labels, sample.value, sample.timestamp))
    return out


def same_value(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def assert_matches_reference(text: str) -> None:
    expected = reference_samples(text)
    ours = [(s.name, s.labels, s.value, s.timestamp) for s in parse_metrics(text).samples]
    assert len(ours) == len(expected)
    for mine, ref in zip(ours, expected, strict=True):
        assert mine[:2] == ref[:2]
        assert same_value(mine[2], ref[2]), (mine, ref)
        assert mine[3] == ref[3]


def models(stats) -> dict[tuple[str, str], object]:
    return {(m.model, m.version): m for m in stats.models}


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_sample_of_read_families_equals_the_reference_parser(capture):
    assert_matches_reference(read(capture))


def test_fixture_set_covers_every_family_read():
    seen = {s.name for name in CAPTURES for s in parse_metrics(read(name)).samples}
    assert seen == READ_FAMILIES


def test_families_not_read_are_skipped():
    snap = parse_metrics(read("pair_before.txt"))
    assert not any(s.name.startswith("nv_pinned_memory") for s in snap.samples)
    assert not any("compute_input_summary" in s.name for s in snap.samples)


def test_rates_between_captured_pair_match_hand_computed_deltas():
    before, after = parse_metrics(read("pair_before.txt")), parse_metrics(read("pair_after.txt"))
    v2, v3 = (models(compute_interval(before, after, 3.0))[("risk_score", v)] for v in "23")
    # v3: success 32 -> 82, BACKEND failures 8 -> 18, 3.00 s apart (see the capture's comment)
    assert v3.status == "ok"
    assert v3.request_rate == pytest.approx((50 + 10) / 3.0)
    assert v3.success_rate_pct == pytest.approx(100 * 50 / 60)
    assert v3.failures == {"BACKEND": 10}
    assert v3.avg_request_ms == pytest.approx((152043 - 83725) / 50 / 1000)
    assert v3.avg_queue_ms == pytest.approx((75634 - 42517) / 50 / 1000)
    compute_us = (2989 - 819) + (65664 - 37977) + (7277 - 2262)
    assert v3.avg_compute_ms == pytest.approx(compute_us / 50 / 1000)
    assert v3.avg_batch_size == pytest.approx((82 - 32) / (100 - 40))
    # v2: 80 requests of 4 rows each, no failures
    assert v2.request_rate == pytest.approx(80 / 3.0)
    assert v2.success_rate_pct == 100.0
    assert v2.failures == {}
    assert v2.avg_batch_size == pytest.approx((480 - 160) / (119 - 39))


def test_p99_and_p50_come_from_the_request_summary_in_ms():
    before, after = parse_metrics(read("pair_before.txt")), parse_metrics(read("pair_after.txt"))
    v3 = models(compute_interval(before, after, 3.0))[("risk_score", "3")]
    assert v3.p99_ms == pytest.approx(7.406)
    assert v3.p50_ms == pytest.approx(1.204)
    assert after.models[("risk_score", "3")].quantile("queue", "0.99") is not None


def test_counter_that_went_down_after_restart_drops_the_interval():
    before = parse_metrics(read("multi_model.txt"))
    after = parse_metrics(read("after_restart.txt"))
    stats = models(compute_interval(before, after, 5.0))
    for key in [("risk_score", "3"), ("ticket_router", "1")]:
        assert stats[key].status == "reset"
        assert stats[key].request_rate is None
        assert stats[key].avg_request_ms is None
        assert stats[key].failures == {}
        assert stats[key].pending == 0  # gauges still reported
        assert stats[key].p99_ms is not None


def test_unloaded_model_vanishes_though_triton_keeps_its_failure_series():
    before = parse_metrics(read("multi_model.txt"))
    after = parse_metrics(read("after_unload.txt"))
    assert set(models(compute_interval(before, after, 2.0))) == {("ticket_router", "1")}
    leftovers = [s for s in after.samples if s.labels.get("model") == "risk_score"]
    assert leftovers and {s.name for s in leftovers} == {"nv_inference_request_failure"}


def test_newly_loaded_version_has_no_rates_and_unloaded_version_is_gone():
    before = parse_metrics(read("pair_after.txt"))
    after = parse_metrics(read("multi_model.txt"))
    stats = models(compute_interval(before, after, 10.0))
    assert ("risk_score", "2") not in stats
    assert stats[("risk_score", "1")].status == "new"
    assert stats[("risk_score", "1")].request_rate is None
    assert stats[("risk_score", "3")].status == "ok"  # a reload kept the counter value
    assert stats[("risk_score", "3")].request_rate > 0


def test_metric_tag_labels_are_kept_and_unescaped():
    snap = parse_metrics(read("multi_model.txt"))
    assert snap.models[("ticket_router", "1")].labels == TAGS
    assert snap.models[("risk_score", "4")].labels == {}


def test_label_values_with_escapes_commas_and_braces():
    text = (
        'nv_inference_count{_a="x,y",_b="q\\"uote\\\\",_c="line\\nbreak}",'
        'model="m",version="1"} 7\n'
        'nv_inference_count{ model = "n" , version="2", } 8\n'
    )
    assert_matches_reference(text)
    snap = parse_metrics(text)
    assert snap.samples[0].labels == {
        "_a": "x,y",
        "_b": 'q"uote\\',
        "_c": "line\nbreak}",
        "model": "m",
        "version": "1",
    }
    assert snap.samples[1].labels == {"model": "n", "version": "2"}


def test_inf_nan_timestamps_blank_lines_and_comments():
    text = (
        "# a free comment\n\n"
        "# TYPE nv_cpu_utilization gauge\n"
        "nv_cpu_utilization NaN\n"
        "   nv_cpu_memory_total_bytes +Inf 1700000000000\n"
        'nv_inference_request_summary_us{model="m",version="1",quantile="0.99"} -Inf\n'
        'nv_inference_request_success{model="m",version="1"} 3 1700000000123\n'
        "\n"
    )
    assert_matches_reference(text)
    snap = parse_metrics(text)
    assert math.isnan(snap.node["cpu_utilization"])
    assert snap.node["memory_total_bytes"] == math.inf
    assert snap.samples[-1].timestamp == pytest.approx(1700000000.123)
    stats = compute_interval(snap, snap, 1.0)
    assert stats.cpu_utilization is None and stats.memory_total_bytes is None
    assert stats.models[0].p99_ms is None


def test_gpu_gauges_are_parsed_per_uuid():
    stats = compute_interval(*[parse_metrics(read("gpu_constructed.txt"))] * 2, 1.0)
    gpus = {g.gpu_uuid: g for g in stats.gpus}
    assert set(gpus) == {GPU_A, GPU_B}
    assert gpus[GPU_A].utilization == 0.73
    assert gpus[GPU_A].memory_total_bytes == 42949672960
    assert gpus[GPU_A].memory_used_bytes == 17179869184
    assert gpus[GPU_A].power_w == 287.5
    assert gpus[GPU_A].power_limit_w == 400
    assert gpus[GPU_B].utilization == 0.0


def test_gpu_average_power_comes_from_the_energy_counter_delta():
    text = read("gpu_constructed.txt")
    later = text.replace("} 1894523.117", "} 1896023.117")  # +1500 J
    stats = compute_interval(parse_metrics(text), parse_metrics(later), 5.0)
    gpus = {g.gpu_uuid: g for g in stats.gpus}
    assert gpus[GPU_A].avg_power_w == pytest.approx(300.0)
    assert gpus[GPU_B].avg_power_w == 0.0
    back = compute_interval(parse_metrics(later), parse_metrics(text), 5.0)
    assert {g.gpu_uuid: g.avg_power_w for g in back.gpus}[GPU_A] is None


def test_node_cpu_and_memory_come_from_the_current_scrape():
    stats = compute_interval(
        parse_metrics(read("pair_before.txt")), parse_metrics(read("pair_after.txt")), 3.0
    )
    assert stats.cpu_utilization == pytest.approx(0.0101010101010101)
    assert stats.memory_used_bytes == 807481344
    assert stats.memory_total_bytes == 25276514304


def test_no_requests_gives_zero_rate_and_no_averages():
    snap = parse_metrics(read("pair_after.txt"))
    v3 = models(compute_interval(snap, snap, 2.0))[("risk_score", "3")]
    assert v3.request_rate == 0
    assert v3.success_rate_pct is None
    assert v3.avg_request_ms is None and v3.avg_batch_size is None


def test_as_dict_is_strict_json():
    stats = compute_interval(
        parse_metrics(read("pair_before.txt")), parse_metrics(read("gpu_constructed.txt")), 3.0
    )
    data = json.loads(json.dumps(stats.as_dict(), allow_nan=False))
    assert data["models"][0]["model"] == "risk_score"
    assert data["gpus"][0]["gpu_uuid"] == GPU_B


def test_interval_must_be_positive():
    snap = parse_metrics(read("pair_after.txt"))
    with pytest.raises(ValueError):
        compute_interval(snap, snap, 0)


@pytest.mark.parametrize("capture", CAPTURES)
def test_a_second_parse_with_cached_heads_still_equals_the_reference(capture):
    text = read(capture)
    parse_metrics(text)
    assert_matches_reference(text)
    again = parse_metrics(text)
    assert again.models == parse_metrics(text).models


def test_timestamps_and_odd_spacing_equal_the_reference_on_a_repeat_parse():
    text = (
        'nv_inference_request_success{model="m",version="1"} 3 1700000000123\n'
        'nv_inference_request_success{model="m",version="1"}   4\n'
        "nv_cpu_utilization\t0.5 1700000000000\n"
    )
    for _ in range(2):
        assert_matches_reference(text)
    assert parse_metrics(text).models[("m", "1")].counters["success"] == 7


def test_sample_labels_are_copies_that_do_not_leak_into_later_parses():
    text = read("multi_model.txt")
    parse_metrics(text).samples[0].labels["model"] = "changed"
    snap = parse_metrics(text)
    assert snap.samples[0].labels["model"] == "ticket_router"
    snap.models[("ticket_router", "1")].labels["_team"] = "changed"
    assert parse_metrics(text).models[("ticket_router", "1")].labels == TAGS


def test_a_generative_models_own_token_counters_are_read_per_version():
    """token_counts.txt: the streaming example counts its tokens under the vLLM backend's
    names (6 streams of 5..10 tokens on v1, 4 of 5..8 on v3)."""
    models = parse_metrics(read("token_counts.txt")).models
    v1, v3 = models[("token_stream", "1")], models[("token_stream", "3")]
    assert v1.counters["output_tokens"] == 45 and v3.counters["output_tokens"] == 26
    assert v1.counters["prompt_tokens"] == 12 and v1.counters["success"] == 6
    others = parse_metrics(read("multi_model.txt")).models.values()  # models counting none
    assert not any("output_tokens" in series.counters for series in others)
    interval = compute_interval(
        parse_metrics(read("multi_model.txt")), parse_metrics(read("multi_model.txt")), 1.0
    )
    assert all(m.output_tokens_rate is None for m in interval.models)
