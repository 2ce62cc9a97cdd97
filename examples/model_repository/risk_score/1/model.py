"""risk_score v1: logistic regression over 128 transaction features."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"])
        weights = np.load(os.path.join(folder, "weights.npz"))
        self.coef = weights["coef"].astype(np.float32)
        self.bias = np.float32(weights["bias"])

    def execute(self, requests):
        responses = []
        for request in requests:
            features = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            logits = features @ self.coef + self.bias
            score = (1.0 / (1.0 + np.exp(-logits))).astype(np.float32).reshape(-1, 1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORE", score)]))
        return responses
