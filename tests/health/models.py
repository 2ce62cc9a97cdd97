"""Python models the health tests register: one that errors while a flag file exists, one
that leaves a file in /dev/shm on every load (a leak outside its stub), a clean one."""

import io

from models_registry.services import model_version_register
from tests.exampledata import EXAMPLES
from tests.registry.archives import tar_gz

FLAGGED = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils

FLAG = {flag!r}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            if os.path.exists(FLAG):
                # An error response: the client gets HTTP 500, Triton counts a success.
                error = pb_utils.TritonError("broken on purpose")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            x = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            score = x.sum(axis=1, keepdims=True).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORE", score)]))
        return responses
"""

LEAKY = """
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        if {leak_mib}:
            path = "/dev/shm/{prefix}-%d-%d" % (os.getpid(), time.time_ns())
            with open(path, "wb") as f:  # never removed: memory no unload gives back
                for _ in range({leak_mib}):
                    f.write(b"\\1" * (1024 * 1024))

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            score = x.sum(axis=1, keepdims=True).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORE", score)]))
        return responses
"""


def register_python(model, user, source: str):
    """Register `source` as the next version of `model` (risk_score's config, renamed)."""
    config = (EXAMPLES / "risk_score" / "config.pbtxt").read_bytes()
    config = config.replace(b'name: "risk_score"', f'name: "{model.name}"'.encode())
    entries = [("config.pbtxt", config), ("1/model.py", source.encode())]
    return model_version_register(model=model, archive=io.BytesIO(tar_gz(entries)), actor=user)
