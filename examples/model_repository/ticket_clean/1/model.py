"""ticket_clean v1: the text a support ticket's classifier should read.

Drops quoted reply lines ("> ..."), everything after a signature marker ("-- " on a line of
its own), links and e-mail addresses; lower-cases, keeps one space between words, and cuts
the result to MAX_CHARS."""

import re

import numpy as np
import triton_python_backend_utils as pb_utils

MAX_CHARS = 2000
LINK = re.compile(r"https?://\S+|www\.\S+")
ADDRESS = re.compile(r"\S+@\S+\.\w+")
SPACES = re.compile(r"\s+")


def clean(text: str) -> str:
    kept = []
    for line in text.splitlines():
        if line.strip() == "--":
            break  # a signature follows
        if not line.lstrip().startswith(">"):
            kept.append(line)
    text = ADDRESS.sub(" ", LINK.sub(" ", "\n".join(kept)))
    return SPACES.sub(" ", text).strip().lower()[:MAX_CHARS]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            cleaned = [clean(t.decode("utf-8", "replace")).encode() for t in texts]
            out = np.array([[c] for c in cleaned], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("CLEAN", out)]))
        return responses
