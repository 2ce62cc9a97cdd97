"""ticket_router v1: bag-of-words linear classifier from support tickets to queues."""

import json
import os
import re

import numpy as np
import triton_python_backend_utils as pb_utils

TOKEN = re.compile(r"[a-z']+")


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(folder, "vocabulary.json"), encoding="utf-8") as handle:
            vocab = json.load(handle)
        self.labels = vocab["labels"]
        self.bias = np.asarray(vocab["bias"], dtype=np.float32)
        self.index = {word: i for i, word in enumerate(vocab["words"])}
        self.weights = np.asarray(vocab["weights"], dtype=np.float32)  # words x labels

    def _classify(self, text):
        counts = np.zeros(len(self.index), dtype=np.float32)
        for word in TOKEN.findall(text.lower()):
            if word in self.index:
                counts[self.index[word]] += 1.0
        logits = counts @ self.weights + self.bias
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        best = int(probs.argmax())
        return self.labels[best], float(probs[best])

    def execute(self, requests):
        responses = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            results = [self._classify(t.decode("utf-8", "replace")) for t in texts]
            labels = np.array([[r[0].encode()] for r in results], dtype=np.object_)
            confidence = np.array([[r[1]] for r in results], dtype=np.float32)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("LABEL", labels), pb_utils.Tensor("CONFIDENCE", confidence)]
                )
            )
        return responses
