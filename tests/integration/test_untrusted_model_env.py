"""Model code is untrusted: a python model on a node the launcher started sees no secret."""

import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from integrations.triton.local import start_cluster

pytestmark = pytest.mark.triton

# The launcher's environment as a control-plane process has it (canary values).
CANARIES = {
    "DJANGO_SECRET_KEY": "canary-secret-key",
    "DATABASE_URL": "postgres://postgres:canary-pw@127.0.0.1:5432/canary",
    "REDIS_URL": "redis://:canary-pw@127.0.0.1:6379/0",
    "CELERY_BROKER_URL": "redis://:canary-pw@127.0.0.1:6379/1",
    "SWITCHYARD_STORAGE_ROOT": "/canary/artifacts",
    "AWS_SECRET_ACCESS_KEY": "canary-aws",
    "PYTHONPATH": "/canary/pythonpath",
}

# A model that answers with the environment its initialize() found, as JSON text.
SPY_MODEL = """
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = json.dumps(dict(os.environ))

    def execute(self, requests):
        out = np.array([self.seen.encode()], dtype=np.object_)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("ENV", out)]) for _ in requests
        ]
"""

SPY_CONFIG = {
    "name": "env_spy",
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [1]}],
    "output": [{"name": "ENV", "data_type": "TYPE_STRING", "dims": [1]}],
}


def _environment_seen_by_a_model(node) -> dict[str, str]:
    client = grpcclient.InferenceServerClient(node.grpc_url)
    try:
        client.load_model(
            "env_spy",
            config=json.dumps(SPY_CONFIG),
            files={"file:1/model.py": SPY_MODEL.encode()},
            client_timeout=60,
        )
        tensor = grpcclient.InferInput("X", [1], "FP32")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
        result = client.infer("env_spy", [tensor], client_timeout=30)
        client.unload_model("env_spy")
        return json.loads(result.as_numpy("ENV")[0])
    finally:
        client.close()


def test_a_python_model_finds_no_switchyard_secret_in_its_environment(tmp_path, monkeypatch):
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    with start_cluster(1, tmp_path) as cluster:
        node = cluster.nodes[0]
        seen = _environment_seen_by_a_model(node)
    leaked = {k: v for k, v in seen.items() if any(c in v for c in CANARIES.values())}
    assert leaked == {}
    assert not set(CANARIES) & set(seen)
    home = node.log_path.parent
    assert seen["HOME"] == str(home)
    assert seen["TMPDIR"].startswith(str(home))
