"""risk_score v2: a two-layer network (128 -> 32 -> 1) retrained on newer transactions."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"])
        weights = np.load(os.path.join(folder, "weights.npz"))
        self.w1, self.b1 = weights["w1"], weights["b1"]
        self.w2, self.b2 = weights["w2"], weights["b2"]

    def execute(self, requests):
        responses = []
        for request in requests:
            features = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            hidden = np.maximum(features @ self.w1 + self.b1, 0.0)
            logits = hidden @ self.w2 + self.b2
            score = (1.0 / (1.0 + np.exp(-logits))).astype(np.float32).reshape(-1, 1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORE", score)]))
        return responses
