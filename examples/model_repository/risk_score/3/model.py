"""risk_score v3 (FAULTY on purpose): v2 plus a log-scaled amount feature with a bug.

The new scaling takes log(0.8 - amount_z) and forgets to clip, so every request whose
first feature (the standardised amount) is above 0.8 yields a non-finite score and fails
with an error: about 21% of requests when features are standard normal. Used to show
that a canary with this version rolls back by itself.
"""

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
            with np.errstate(invalid="ignore", divide="ignore"):
                amount = np.log(0.8 - features[:, :1])  # the bug: no clip
            hidden = np.maximum(features @ self.w1 + self.b1, 0.0)
            logits = hidden @ self.w2 + self.b2 + 0.01 * amount
            if not np.all(np.isfinite(logits)):
                # Raising fails the request and Triton counts it (reason BACKEND).
                raise pb_utils.TritonModelException("non-finite risk score (amount scaling)")
            score = (1.0 / (1.0 + np.exp(-logits))).astype(np.float32).reshape(-1, 1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORE", score)]))
        return responses
