"""token_stream v4 (FAULTY BY SETTING, on purpose): v1 with faults from faults.json.

Each stream fails with the probability `failure_rate` (0.02 here) at its first response:
the model answers it with an error, which Triton sends through `generate_stream` as HTTP
400 with the error as its one event (docs/TRITON.md), the way a generative model failing
on some prompts would; the others stream as v1's do: MAX_TOKENS tokens (at most 256), the
first after FIRST_TOKEN_MS and each next one TOKEN_MS later, counted as
`vllm:prompt_tokens_total` and `vllm:generation_tokens_total`. Tests and benches write their
own faults.json to get a breach of any size."""

import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FIRST_TOKEN_MS = 40.0
TOKEN_MS = 10.0
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
        folder = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(folder, "faults.json"), encoding="utf-8") as handle:
            self.failure_rate = float(json.load(handle).get("failure_rate", 0.0))
        self.rng = np.random.default_rng()
        # Token counters under the names the vLLM backend for Triton exports (model and
        # version labels), which Switchyard reads as the version's token figures. The
        # families must outlive their metrics: kept on the instance.
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.families = [
            pb_utils.MetricFamily(
                name=f"vllm:{kind}_tokens_total",
                description=f"{kind} tokens",
                kind=pb_utils.MetricFamily.COUNTER,
            )
            for kind in ("prompt", "generation")
        ]
        self.prompt_tokens, self.output_tokens = (f.Metric(labels=labels) for f in self.families)

    def execute(self, requests):
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy().reshape(-1)
            count = pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS").as_numpy()
            text = prompt[0].decode("utf-8", "replace") if len(prompt) else ""
            n = max(0, min(MAX_TOKENS, int(count.reshape(-1)[0]) if count.size else 0))
            # Counted here, in execute's thread, as the request is taken (the tokens it will
            # stream): a metric changed from the stream threads crashed the node (2.51).
            self.prompt_tokens.increment(len(text.split()))
            sender = request.get_response_sender()
            if self.rng.random() < self.failure_rate:  # fails at its first response
                error = pb_utils.TritonError("the generator failed on this prompt")
                sender.send(
                    pb_utils.InferenceResponse(error=error),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            self.output_tokens.increment(n)
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
