"""fraud_gate v1: approve, review or decline a transaction from risk_score's score.

Business logic scripting: each request is sent on to risk_score (its newest loaded version)
through Triton's in-process API, and its score turned into a decision: below APPROVE
approve, above DECLINE decline, review in between. An error of risk_score is this
request's error."""

import numpy as np
import triton_python_backend_utils as pb_utils

APPROVE, DECLINE = 0.3, 0.8


def decide(scores: np.ndarray) -> np.ndarray:
    labels = np.where(
        scores < APPROVE, b"approve", np.where(scores > DECLINE, b"decline", b"review")
    )
    return labels.astype(np.object_)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            features = pb_utils.get_input_tensor_by_name(request, "FEATURES")
            answer = pb_utils.InferenceRequest(
                model_name="risk_score", requested_output_names=["SCORE"], inputs=[features]
            ).exec()
            if answer.has_error():
                failed = pb_utils.TritonError(f"risk_score: {answer.error().message()}")
                responses.append(pb_utils.InferenceResponse(error=failed))
                continue
            scores = pb_utils.get_output_tensor_by_name(answer, "SCORE").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("SCORE", scores), pb_utils.Tensor("DECISION", decide(scores))]
                )
            )
        return responses
