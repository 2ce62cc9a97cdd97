"""token_stream v3 (SLOW TOKENS, on purpose): v1 with each token after the first 2x as slow.

Streams MAX_TOKENS tokens (at most 256) for a PROMPT, the first after
FIRST_TOKEN_MS and each next one TOKEN_MS later, one response per token, then the final
flag. Each request streams from a thread of its own, so streams run side by side (a
decoupled model answers after execute returns)."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FIRST_TOKEN_MS = 40.0
TOKEN_MS = 20.0
MAX_TOKENS = 256
WORDS = ("the", "risk", "is", "low", "and", "the", "ticket", "goes", "to", "billing")


def tokens_for(prompt: str, count: int) -> list[str]:
    """The stream's tokens: the same words for the same prompt, whatever the pace."""
    start = sum(prompt.encode()) % len(WORDS)
    return [WORDS[(start + i) % len(WORDS)] for i in range(count)]


class TritonPythonModel:
    first_token_s = FIRST_TOKEN_MS / 1000.0
    token_s = TOKEN_MS / 1000.0

    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy().reshape(-1)
            count = pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS").as_numpy()
            text = prompt[0].decode("utf-8", "replace") if len(prompt) else ""
            n = max(0, min(MAX_TOKENS, int(count.reshape(-1)[0]) if count.size else 0))
            sender = request.get_response_sender()
            thread = threading.Thread(target=self._stream, args=(sender, text, n), daemon=True)
            thread.start()
            self.threads = [t for t in self.threads if t.is_alive()] + [thread]
        return None

    def _stream(self, sender, text: str, n: int) -> None:
        time.sleep(self.first_token_s)
        for i, token in enumerate(tokens_for(text, n)):
            if i:
                time.sleep(self.token_s)
            out = pb_utils.Tensor("TOKEN", np.array([token.encode()], dtype=np.object_))
            sender.send(pb_utils.InferenceResponse([out]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=5)
