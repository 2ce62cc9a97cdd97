"""Where two versions' parsed configs differ in what Triton makes them share (pure)."""

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from integrations.triton.model_config import (
    config_differences,
    config_for_serving,
    config_to_dict,
)
from integrations.triton.model_config.diff import IGNORED, shared_fields, value_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
RISK = (EXAMPLES / "risk_score" / "config.pbtxt").read_text()


def stored(text: str) -> dict:
    """The config as the registry stores it (config_json)."""
    config = model_config_pb2.ModelConfig()
    text_format.Parse(text, config)
    return config_to_dict(config)


def rows(baseline: str, candidate: str) -> list[tuple[str, str, str]]:
    found = config_differences(stored(baseline), stored(candidate))
    return [(d.path, d.baseline_text, d.candidate_text) for d in found]


def test_configs_that_differ_only_in_text_name_and_version_policy_serve_alike():
    rewritten = (
        RISK.replace("# Fraud risk score", "# a new comment\n# Fraud risk score")
        .replace('name: "risk_score"', 'name: "risk_score_copy"')
        .replace("dims: [ 128 ]", "dims: 128")  # one value, another spelling
        .replace("data_type: TYPE_FP32", "data_type: 11", 1)  # the enum by number
        .replace("  ", "      ")
    )
    rewritten += "version_policy { latest { num_versions: 2 } }\n"
    rewritten += 'parameters { key: "PUSH_ID" value { string_value: "abc" } }\n'
    assert rows(RISK, rewritten) == []
    assert set(IGNORED) == {"name", "version_policy", "parameters.PUSH_ID"}


def test_the_config_a_push_loads_serves_like_the_stored_one():
    config = model_config_pb2.ModelConfig()
    text_format.Parse(RISK, config)
    loaded = json.loads(config_for_serving(config, versions=[1, 2], push_id="p-1"))
    assert config_differences(stored(RISK), loaded) == []


def test_stored_int64_as_strings_and_as_numbers_compare_equal():
    as_strings = stored(RISK)
    assert as_strings["input"][0]["dims"] == ["128"]  # protobuf JSON writes int64 as text
    as_numbers = json.loads(json.dumps(as_strings).replace('"128"', "128"))
    assert config_differences(as_strings, as_numbers) == []


def test_each_difference_is_named_by_its_field_path_with_both_values():
    changed = (
        RISK.replace("max_batch_size: 64", "max_batch_size: 32")
        .replace("dims: [ 128 ]", "dims: [ 64 ]")
        .replace("count: 1", "count: 2")
        .replace("max_queue_delay_microseconds: 500", "max_queue_delay_microseconds: 100")
    )
    changed += 'parameters { key: "THRESHOLD" value { string_value: "0.7" } }\n'
    assert rows(RISK, changed) == [
        ("max_batch_size", "64", "32"),
        ("input[FEATURES].dims", "[128]", "[64]"),
        ("instance_group[0].count", "1", "2"),
        ("dynamic_batching.max_queue_delay_microseconds", "500", "100"),
        ("parameters.THRESHOLD", "(not set)", "0.7"),
    ]


COUNTRY = '  { name: "COUNTRY" data_type: TYPE_STRING dims: [ 1 ] },\n'


def test_inputs_are_matched_by_name_and_an_added_one_is_shown_whole():
    two = RISK.replace("input [\n", "input [\n" + COUNTRY)
    added = '{"name": "COUNTRY", "data_type": "TYPE_STRING", "dims": [1]}'
    assert rows(RISK, two) == [("input[COUNTRY]", "(not set)", added)]
    assert rows(two, RISK) == [("input[COUNTRY]", added, "(not set)")]


def test_the_same_inputs_in_another_order_report_only_the_order():
    first = RISK.replace("input [\n", "input [\n" + COUNTRY)
    last = RISK.replace(
        "dims: [ 128 ]\n  }\n", "dims: [ 128 ]\n  },\n" + COUNTRY.rstrip(",\n") + "\n", 1
    )
    # Some backends (PyTorch's) bind inputs by position, so the order itself counts.
    assert rows(first, last) == [
        ("input (order)", '["COUNTRY", "FEATURES"]', '["FEATURES", "COUNTRY"]')
    ]


@pytest.mark.parametrize(
    ("extra", "path", "candidate"),
    [
        # An empty message is present: it switches the scheduler on, so it is not "not set".
        ("response_cache { }", "response_cache", "{}"),
        ('default_model_filename: "model2.py"', "default_model_filename", "model2.py"),
        ('metric_tags { key: "team" value: "fraud" }', "metric_tags.team", "fraud"),
        ('parameters { key: "a.b" value { string_value: "" } }', 'parameters["a.b"]', '""'),
    ],
)
def test_a_field_or_map_key_set_on_one_side_is_named_by_its_path(extra, path, candidate):
    assert rows(RISK, RISK + extra + "\n") == [(path, "(not set)", candidate)]


def test_a_key_of_a_map_inside_a_message_is_named_by_its_path():
    queue = "max_queue_delay_microseconds: 500"
    policy = RISK.replace(
        queue, queue + " priority_queue_policy { key: 1 value { max_queue_size: 3 } }"
    )
    assert rows(RISK, policy) == [
        ("dynamic_batching.priority_queue_policy[1]", "(not set)", '{"max_queue_size": 3}')
    ]


def test_a_message_on_one_side_only_is_shown_whole_without_empty_maps():
    without = RISK.replace("dynamic_batching {\n  max_queue_delay_microseconds: 500\n}\n", "")
    assert rows(RISK, without) == [
        ("dynamic_batching", '{"max_queue_delay_microseconds": 500}', "(not set)")
    ]


def test_shared_fields_leave_out_what_is_per_version():
    fields = shared_fields(
        stored(RISK + 'parameters { key: "PUSH_ID" value { string_value: "x" } }')
    )
    assert "name" not in fields and "version_policy" not in fields
    assert fields["parameters"] == {} and fields["max_batch_size"] == 64


@pytest.mark.parametrize("junk", [["not", "a", "config"], {"max_batch_size": "many"}, {"nope": 1}])
def test_something_that_is_no_model_config_is_a_value_error(junk):
    with pytest.raises(ValueError, match="not a model config"):
        config_differences(stored(RISK), junk)


def test_values_read_as_words_or_compact_json():
    assert value_text(None) == "(not set)"
    assert value_text("KIND_GPU") == "KIND_GPU" and value_text("") == '""'
    assert value_text([1, 2]) == "[1, 2]" and value_text(True) == "true"
    assert value_text({"count": 2}) == '{"count": 2}'


def test_a_scalar_at_its_default_is_the_same_as_not_set_but_an_empty_message_is_not():
    unbatched = RISK.replace("max_batch_size: 64\n", "").replace(
        "dynamic_batching {\n  max_queue_delay_microseconds: 500\n}\n", ""
    )
    assert rows(unbatched, unbatched + "max_batch_size: 0\n") == []
    assert rows(unbatched, unbatched + "dynamic_batching { }\n") == [
        ("dynamic_batching", "(not set)", "{}")
    ]
