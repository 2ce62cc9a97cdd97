"""risk_score v5 (FAULTY BY SETTING, on purpose): v2's scores with faults from faults.json.

After its first `healthy_requests` (2: the load's two warm-up inferences, Triton's own and
Switchyard's, pass):
* each request fails, independently of its input, with the probability `failure_rate`
  (0.02 here: twice what a 99 % success SLA allows), as an error response for that request
  alone (HTTP 500 to the client, the rest of the batch answered), the way a flaky
  dependency fails: Triton counts such responses as successes, only the router's log sees
  them;
* each request takes `extra_ms` longer (0 here), as a slower dependency would;
* the score of a `disagree_rate` share of inputs (0 here; the same inputs every time, picked
  by a hash of the features) is moved by 0.25, as a subtly wrong build would answer;
* a request with a feature above `fail_above` (none here) fails as an error response, as a
  build that chokes on inputs outside its training range would: callers that send such
  inputs (a pipeline feeding it unscaled features) fail while others are served.
Tests and benches write their own faults.json to get a breach of any size.
"""

import hashlib
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"])
        weights = np.load(os.path.join(folder, "weights.npz"))
        self.w1, self.b1 = weights["w1"], weights["b1"]
        self.w2, self.b2 = weights["w2"], weights["b2"]
        with open(os.path.join(folder, "faults.json")) as f:
            faults = json.load(f)
        self.failure_rate = float(faults.get("failure_rate", 0.0))
        self.extra_s = float(faults.get("extra_ms", 0.0)) / 1000.0
        self.healthy = int(faults.get("healthy_requests", 0))
        self.disagree_rate = float(faults.get("disagree_rate", 0.0))
        above = faults.get("fail_above")
        self.fail_above = None if above is None else float(above)
        self.rng = np.random.default_rng()

    def execute(self, requests):
        responses = []
        for request in requests:
            self.healthy -= 1
            faulty = self.healthy < 0
            if faulty and self.extra_s:
                time.sleep(self.extra_s)
            if faulty and self.rng.random() < self.failure_rate:
                error = pb_utils.TritonError("upstream feature service timed out")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            features = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            if faulty and self.fail_above is not None and features.max() > self.fail_above:
                error = pb_utils.TritonError(f"a feature above {self.fail_above:g}: out of range")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            hidden = np.maximum(features @ self.w1 + self.b1, 0.0)
            logits = hidden @ self.w2 + self.b2
            score = (1.0 / (1.0 + np.exp(-logits))).astype(np.float32).reshape(-1, 1)
            if faulty and self.disagree_rate:
                score = self._disagreeing(features, score)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORE", score)]))
        return responses

    def _disagreeing(self, features, score):
        """`score` with the rows the disagree_rate picks (by their features' hash) moved."""
        for row in range(features.shape[0]):
            digest = hashlib.sha256(np.ascontiguousarray(features[row]).tobytes()).digest()
            if int.from_bytes(digest[:4], "big") / 2**32 < self.disagree_rate:
                score[row, 0] += -0.25 if score[row, 0] >= 0.75 else 0.25
        return score
