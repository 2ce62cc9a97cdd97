"""risk_score v4 (SLOW on purpose): v2 with test-time augmentation.

Scores 64 jittered copies of every row and averages them, which costs several times
v2's latency for a negligible gain: the version a benchmark or a canary should refuse.
"""

import os

import numpy as np
import triton_python_backend_utils as pb_utils

AUGMENTED_COPIES = 64
# The augmentation also calls a feature service per request in production; this stands in
# for that round trip so the slowdown is steady on any CPU.
FEATURE_SERVICE_S = 0.005


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"])
        weights = np.load(os.path.join(folder, "weights.npz"))
        self.w1, self.b1 = weights["w1"], weights["b1"]
        self.w2, self.b2 = weights["w2"], weights["b2"]
        self.rng = np.random.default_rng(4)

    def execute(self, requests):
        import time

        responses = []
        for request in requests:
            features = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            time.sleep(FEATURE_SERVICE_S)
            noise = self.rng.normal(0.0, 0.01, size=(AUGMENTED_COPIES, *features.shape))
            copies = (features[None, :, :] + noise).astype(np.float32)
            hidden = np.maximum(copies @ self.w1 + self.b1, 0.0)
            logits = (hidden @ self.w2 + self.b2).mean(axis=0)
            score = (1.0 / (1.0 + np.exp(-logits))).astype(np.float32).reshape(-1, 1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORE", score)]))
        return responses
