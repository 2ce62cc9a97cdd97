"""generate_inputs and triton_datatype, as pure functions (no server)."""

import json

import ml_dtypes
import numpy as np
import pytest

from integrations.triton.inputs import generate_inputs, triton_datatype
from tests.exampledata import example_config_json


def config(*inputs: dict, max_batch_size: int = 0) -> dict:
    return {"name": "m", "max_batch_size": max_batch_size, "input": list(inputs)}


def spec(name: str, data_type: str, dims: list) -> dict:
    return {"name": name, "data_type": data_type, "dims": dims}


@pytest.mark.parametrize(
    ("data_type", "datatype", "dtype"),
    [
        ("TYPE_BOOL", "BOOL", np.bool_),
        ("TYPE_UINT8", "UINT8", np.uint8),
        ("TYPE_UINT16", "UINT16", np.uint16),
        ("TYPE_UINT32", "UINT32", np.uint32),
        ("TYPE_UINT64", "UINT64", np.uint64),
        ("TYPE_INT8", "INT8", np.int8),
        ("TYPE_INT16", "INT16", np.int16),
        ("TYPE_INT32", "INT32", np.int32),
        ("TYPE_INT64", "INT64", np.int64),
        ("TYPE_FP16", "FP16", np.float16),
        ("TYPE_FP32", "FP32", np.float32),
        ("TYPE_FP64", "FP64", np.float64),
        ("TYPE_BF16", "BF16", ml_dtypes.bfloat16),
        ("TYPE_STRING", "BYTES", np.object_),
    ],
)
def test_every_triton_type_maps_to_its_protocol_name_and_numpy_dtype(data_type, datatype, dtype):
    assert triton_datatype(data_type) == datatype
    tensor = generate_inputs(config(spec("X", data_type, [3])))["X"]
    assert tensor.dtype == np.dtype(dtype)
    assert tensor.shape == (3,)


def test_triton_datatype_rejects_an_unknown_type():
    with pytest.raises(ValueError, match="Unknown Triton data type 'TYPE_FP8'"):
        triton_datatype("TYPE_FP8")


def test_batching_model_gets_the_batch_dimension_first():
    inputs = generate_inputs(config(spec("X", "TYPE_FP32", [4, 2]), max_batch_size=8), batch_size=5)
    assert inputs["X"].shape == (5, 4, 2)


def test_non_batching_model_gets_no_batch_dimension():
    assert generate_inputs(config(spec("X", "TYPE_FP32", [4, 2])))["X"].shape == (4, 2)


def test_batch_size_beyond_max_batch_size_is_refused():
    with pytest.raises(ValueError, match="batch_size must be 1..8"):
        generate_inputs(config(spec("X", "TYPE_FP32", [4]), max_batch_size=8), batch_size=9)
    with pytest.raises(ValueError, match="does not batch"):
        generate_inputs(config(spec("X", "TYPE_FP32", [4])), batch_size=2)


def test_variable_dims_take_variable_dim_unless_overridden_per_input():
    cfg = config(
        spec("A", "TYPE_INT64", [-1, 3]), spec("B", "TYPE_FP32", [-1, -1]), max_batch_size=4
    )
    inputs = generate_inputs(cfg, batch_size=2, variable_dim=5, dims_override={"B": [7, 1]})
    assert inputs["A"].shape == (2, 5, 3)
    assert inputs["B"].shape == (2, 7, 1)


def test_dims_override_must_fit_the_configured_dims_and_name_a_real_input():
    cfg = config(spec("A", "TYPE_FP32", [-1, 3]))
    with pytest.raises(ValueError, match="does not fit dims"):
        generate_inputs(cfg, dims_override={"A": [4, 4]})
    with pytest.raises(ValueError, match="does not fit dims"):
        generate_inputs(cfg, dims_override={"A": [4]})
    with pytest.raises(ValueError, match="inputs the model does not have"):
        generate_inputs(cfg, dims_override={"Z": [1]})


def test_proto_json_config_with_string_dims_is_accepted():
    cfg = json.loads(example_config_json("risk_score", name="r", versions=[1]))
    assert cfg["input"][0]["dims"] == ["128"]  # MessageToJson writes int64 as strings
    inputs = generate_inputs(cfg, batch_size=2)
    assert inputs["FEATURES"].shape == (2, 128)
    assert inputs["FEATURES"].dtype == np.float32


def test_floats_are_standard_normal_and_ints_small():
    cfg = config(spec("F", "TYPE_FP64", [20000]), spec("I", "TYPE_INT32", [1000]))
    inputs = generate_inputs(cfg)
    assert abs(inputs["F"].mean()) < 0.05 and abs(inputs["F"].std() - 1.0) < 0.05
    assert inputs["I"].min() >= 0 and inputs["I"].max() <= 9


def test_strings_are_short_utf8_texts():
    texts = generate_inputs(config(spec("T", "TYPE_STRING", [1]), max_batch_size=16), batch_size=6)
    assert texts["T"].shape == (6, 1)
    for text in texts["T"].reshape(-1):
        assert isinstance(text, bytes)
        assert 2 <= len(text.decode().split()) <= 6


def test_same_seed_gives_the_same_request_and_another_seed_another():
    cfg = config(spec("X", "TYPE_FP32", [16]), spec("T", "TYPE_STRING", [2]))
    first, again, other = (generate_inputs(cfg, seed=s) for s in (1, 1, 2))
    np.testing.assert_array_equal(first["X"], again["X"])
    assert list(first["T"]) == list(again["T"])
    assert not np.array_equal(first["X"], other["X"])
