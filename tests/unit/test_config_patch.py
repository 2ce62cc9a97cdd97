"""A config.pbtxt changed by a patch of top-level fields (pure: no services)."""

import pytest
from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

from integrations.triton.model_config.patch import PatchError, config_patched

BASE = """# a comment that the patched text does not keep
name: "risk_score"
backend: "python"
max_batch_size: 64
input [ { name: "FEATURES" data_type: TYPE_FP32 dims: [ 128 ] } ]
output [ { name: "SCORE" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 500 preferred_batch_size: [ 8 ] }
instance_group [ { kind: KIND_CPU count: 1 }, { kind: KIND_CPU count: 3 } ]
"""


def _parsed(text: str) -> ModelConfig:
    return text_format.Parse(text, ModelConfig())


def test_each_field_given_replaces_the_sources_whole_and_the_rest_is_kept():
    out = _parsed(
        config_patched(
            BASE,
            {
                "dynamic_batching": {"max_queue_delay_microseconds": 2000},
                "instance_group": [{"kind": "KIND_CPU", "count": 2}],
                "max_batch_size": 32,
            },
        )
    )
    base = _parsed(BASE)
    # A message is replaced whole: the old preferred sizes are gone, not merged.
    assert out.dynamic_batching.max_queue_delay_microseconds == 2000
    assert list(out.dynamic_batching.preferred_batch_size) == []
    # A repeated field is replaced whole, never appended to.
    cpu = ModelInstanceGroup.KIND_CPU
    assert [(g.kind, g.count) for g in out.instance_group] == [(cpu, 2)]
    assert out.max_batch_size == 32
    assert out.input == base.input and out.output == base.output
    assert out.name == "risk_score" and out.backend == "python"


def test_null_removes_a_field():
    out = _parsed(config_patched(BASE, {"dynamic_batching": None}))
    assert not out.HasField("dynamic_batching")
    assert out.max_batch_size == 64


@pytest.mark.parametrize(
    ("patch", "field", "says"),
    [
        ({"max_batch_sise": 8}, "max_batch_sise", "not a field of Triton's ModelConfig"),
        ({"maxBatchSize": 8}, "maxBatchSize", "check its spelling"),  # config.pbtxt's names
        ({"name": "other"}, "name", "can't be patched"),
        ({"max_batch_size": "many"}, "max_batch_size", "max_batch_size"),
        ({"instance_group": [{"kind": "KIND_XPU"}]}, "instance_group", "KIND_XPU"),
        ({"dynamic_batching": {"delay": 3}}, "dynamic_batching", "delay"),
        ({}, None, "changes no field"),
    ],
)
def test_a_patch_that_cannot_apply_names_its_field(patch, field, says):
    with pytest.raises(PatchError) as refused:
        config_patched(BASE, patch)
    assert refused.value.field == field
    assert says in str(refused.value)


def test_a_source_that_does_not_parse_is_refused():
    with pytest.raises(PatchError, match="does not parse"):
        config_patched("name: [", {"max_batch_size": 8})
