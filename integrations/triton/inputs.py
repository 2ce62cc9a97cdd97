"""Valid request tensors built from a model config, for warm-up, smoke inferences and benchmarks.

The config is a dict as Triton's `GET .../config` returns it, or `MessageToDict` of the
ModelConfig proto with `preserving_proto_field_name=True` (int64 dims then come as strings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tritonclient.utils import triton_to_np_dtype

# Triton's config enum (without TYPE_) -> the datatype name of the inference protocol.
_DATATYPES = {
    "BOOL": "BOOL",
    "UINT8": "UINT8",
    "UINT16": "UINT16",
    "UINT32": "UINT32",
    "UINT64": "UINT64",
    "INT8": "INT8",
    "INT16": "INT16",
    "INT32": "INT32",
    "INT64": "INT64",
    "FP16": "FP16",
    "FP32": "FP32",
    "FP64": "FP64",
    "BF16": "BF16",
    "STRING": "BYTES",
    "BYTES": "BYTES",
}

_WORDS = (
    "charged twice refund invoice app crashes error login password reset email account "
    "card payment slow screen update order delivery late please help thanks"
).split()


def triton_datatype(data_type: str) -> str:
    """The protocol datatype of a config type: "TYPE_FP32" -> "FP32", "TYPE_STRING" -> "BYTES"."""
    key = data_type.strip().upper().removeprefix("TYPE_")
    if key not in _DATATYPES:
        raise ValueError(f"Unknown Triton data type {data_type!r}.")
    return _DATATYPES[key]


def numpy_dtype(data_type: str) -> np.dtype:
    """The numpy dtype tritonclient expects for a config data_type (BYTES -> object)."""
    datatype = triton_datatype(data_type)
    if datatype == "BYTES":
        return np.dtype(np.object_)
    return np.dtype(triton_to_np_dtype(datatype))


def generate_inputs(
    config: Mapping[str, Any],
    *,
    batch_size: int = 1,
    seed: int = 0,
    variable_dim: int = 8,
    dims_override: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """One valid, seeded request for every input of `config` (batch dim added when batching)."""
    max_batch_size = int(config.get("max_batch_size", 0) or 0)
    if max_batch_size > 0 and not 1 <= batch_size <= max_batch_size:
        raise ValueError(
            f"batch_size must be 1..{max_batch_size} (max_batch_size), not {batch_size}."
        )
    if max_batch_size == 0 and batch_size != 1:
        raise ValueError("This model does not batch (max_batch_size 0): use batch_size=1.")
    overrides = dict(dims_override or {})
    unknown = set(overrides) - {spec["name"] for spec in config.get("input", [])}
    if unknown:
        raise ValueError(f"dims_override names inputs the model does not have: {sorted(unknown)}.")
    rng = np.random.default_rng(seed)
    tensors = {}
    for spec in config.get("input", []):
        dims = input_dims(spec, variable_dim=variable_dim, override=overrides.get(spec["name"]))
        shape = [batch_size, *dims] if max_batch_size > 0 else dims
        tensors[spec["name"]] = random_tensor(spec.get("data_type", "TYPE_FP32"), shape, rng)
    return tensors


def input_dims(
    spec: Mapping[str, Any], *, variable_dim: int = 8, override: Sequence[int] | None = None
) -> list[int]:
    """The dims of one input without the batch dim, -1 replaced by `variable_dim` or `override`."""
    dims = [int(d) for d in spec.get("dims", [])]
    if override is None:
        return [variable_dim if d == -1 else d for d in dims]
    wanted = [int(d) for d in override]
    fits = len(wanted) == len(dims) and all(d in (-1, w) for d, w in zip(dims, wanted, strict=True))
    if not fits or any(w < 0 for w in wanted):
        raise ValueError(
            f"dims_override {wanted} does not fit dims {dims} of input {spec['name']!r}."
        )
    return wanted


def random_tensor(data_type: str, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Standard-normal floats, small ints (0-9), random bools or short texts, in `shape`."""
    dtype = numpy_dtype(data_type)
    shape = tuple(shape)
    if dtype == np.object_:
        count = int(np.prod(shape, dtype=np.int64))
        texts = [_text(rng) for _ in range(count)]
        return np.array(texts, dtype=np.object_).reshape(shape)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 10, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _text(rng: np.random.Generator) -> bytes:
    count = int(rng.integers(2, 7))
    return " ".join(rng.choice(_WORDS, size=count)).encode()


def raw_bytes(array: np.ndarray) -> bytes:
    """A tensor as Triton's raw binary input: row-major element bytes, little-endian; BYTES
    elements each as a 4-byte little-endian length followed by the bytes."""
    array = np.asarray(array)
    if array.dtype == np.object_ or array.dtype.kind in "US":
        parts = []
        for item in array.reshape(-1):
            data = item.encode() if isinstance(item, str) else bytes(item)
            parts.append(len(data).to_bytes(4, "little") + data)
        return b"".join(parts)
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
