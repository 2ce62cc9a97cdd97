"""ticket_priority v1: a queue and a priority from the classifier's label and confidence.

Below SURE the label is not trusted: the ticket goes to the "triage" queue (people) at P2.
Otherwise technical tickets are P1 (outages wait for no one), billing and account P2, the
rest P3. An unknown label is "other"."""

import numpy as np
import triton_python_backend_utils as pb_utils

SURE = 0.5
PRIORITY = {"technical": "P1", "billing": "P2", "account": "P2", "other": "P3"}


def route(label: str, confidence: float) -> tuple[str, str]:
    if not confidence >= SURE:  # NaN too
        return "triage", "P2"
    queue = label if label in PRIORITY else "other"
    return queue, PRIORITY[queue]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            labels = pb_utils.get_input_tensor_by_name(request, "LABEL").as_numpy().reshape(-1)
            sure = pb_utils.get_input_tensor_by_name(request, "CONFIDENCE").as_numpy().reshape(-1)
            pairs = zip(labels, sure, strict=True)  # Triton gives both the batch's size
            routed = [route(label.decode("utf-8", "replace"), float(c)) for label, c in pairs]
            queues = np.array([[q.encode()] for q, _ in routed], dtype=np.object_)
            priorities = np.array([[p.encode()] for _, p in routed], dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("QUEUE", queues), pb_utils.Tensor("PRIORITY", priorities)]
                )
            )
        return responses
