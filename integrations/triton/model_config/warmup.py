"""Triton-native warm-up: Triton runs it on every instance of a version before that version
is READY, so no client (and no instance a push did not reach) meets a cold model.

The sample is the request a push also sends as its own warm-up inference (generated from the
config); its tensors travel as files in the model directory's `warmup/` folder, which is where
Triton reads `input_data_file` from, so text inputs get real words rather than empty strings.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from tritonclient.grpc import model_config_pb2
from tritonclient.grpc.model_config_pb2 import ModelConfig

from integrations.triton.inputs import raw_bytes
from integrations.triton.model_config.graph import CALLS_PARAMETER

WARMUP_NAME = "switchyard"
WARMUP_FOLDER = "warmup"


def native_warmup_skip_reason(config: ModelConfig, sample: Mapping[str, np.ndarray]) -> str:
    """Why `sample` cannot become this config's native warm-up ("" when it can)."""
    if config.model_warmup:
        return "the config has its own model_warmup"
    if config.platform == "ensemble":
        return "ensembles run their steps' warm-ups, not their own"
    if config.HasField("sequence_batching"):
        return "a sequence model's warm-up needs its control inputs"
    if config.model_transaction_policy.decoupled:
        return "decoupled models are warmed by the push's own inference only"
    if CALLS_PARAMETER in config.parameters:
        # Its warm-up would call other models from inside its load; one such call failing
        # there took a Triton 2.51 node down with SIGSEGV once (docs/TRITON.md).
        return "a BLS model is warmed by the push's own inference, once it is READY"
    for spec in config.input:
        if spec.is_shape_tensor:
            return f"input {spec.name} is a shape tensor: generated values may not fit"
        if spec.data_type == model_config_pb2.TYPE_BF16:
            return f"input {spec.name} is BF16, which numpy does not hold"
        if spec.name not in sample:
            return f"input {spec.name} is not in the sample"
    return ""


def add_native_warmup(config: ModelConfig, sample: Mapping[str, np.ndarray]) -> dict[str, bytes]:
    """Give `config` (in place) a one-request warm-up of `sample`; its files by model-dir path.

    `sample` is one request with batch size 1 (as `generate_inputs` makes it): each input's
    file holds that one sample. Nothing changes, and {} is returned, when the config cannot
    take it (`native_warmup_skip_reason`).
    """
    if native_warmup_skip_reason(config, sample):
        return {}
    batching = config.max_batch_size > 0
    warmup = config.model_warmup.add(name=WARMUP_NAME, batch_size=1)
    files = {}
    for index, spec in enumerate(config.input):
        array = np.asarray(sample[spec.name])
        dims = array.shape[1:] if batching else array.shape
        file_name = f"{WARMUP_NAME}_{index}"
        tensor = warmup.inputs[spec.name]
        tensor.data_type = spec.data_type
        tensor.dims.extend(int(d) for d in dims)
        tensor.input_data_file = file_name
        files[f"{WARMUP_FOLDER}/{file_name}"] = raw_bytes(array)
    return files
