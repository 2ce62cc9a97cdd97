"""The router is an inference-only gate: a real nginx in front of the two real Triton nodes of
the session. Repository, model control, shared memory, trace, logging, statistics and config
calls through the router are answered by nginx itself (HTTP 403 with a JSON body, gRPC
PERMISSION_DENIED), never reach a node (checked on the node directly) and are counted as
refused in the router's access log; inference, readiness and metadata pass as before."""

import base64
import http.client
import json
import time
import uuid

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from integrations.routers import ModelRoute, RouterState
from integrations.routers.access_log import last_lines, refused_requests, router_counts
from integrations.routers.nginx import NginxRouter
from integrations.triton.local import free_ports
from tests.exampledata import example_config_json, example_files
from tests.integration.test_nginx_router import BODY, risk_pair  # noqa: F401 - `model`
from tests.nodes import grpc_key

pytestmark = pytest.mark.triton

REFUSED = "the router carries inference only: "


@pytest.fixture
def router(tmp_path, model, triton_cluster):
    """An nginx router with HTTP and gRPC listeners, the model's split pinned to v1."""
    http_port, grpc_port = free_ports(2)
    driver = NginxRouter(
        prefix_dir=tmp_path / "nginx",
        listen=f"127.0.0.1:{http_port}",
        grpc_listen=f"127.0.0.1:{grpc_port}",
    )
    nodes = triton_cluster.nodes
    state = RouterState(
        [n.http_url for n in nodes],
        [ModelRoute(model, {1: 100.0, 2: 0.0})],
        grpc_upstreams=[n.grpc_url for n in nodes],
    )
    try:
        driver.apply(state)
        yield driver
    finally:
        driver.stop()


def send(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, str, bytes]:
    """One request with the path sent exactly as given: (status, content type, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body, headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        conn.close()


def load_body(name: str) -> bytes:
    """A model load with its config and files, as `POST /v2/repository/models/<m>/load`."""
    parameters = {"config": example_config_json("risk_score", name=name, versions=[1])}
    for key, data in example_files("risk_score", 1).items():
        parameters[key] = base64.b64encode(data).decode()
    return json.dumps({"parameters": parameters}).encode()


def control_calls(model: str, stranger: str) -> list[tuple[str, str, bytes | None]]:
    shm = {"key": "/sy_gate", "offset": 0, "byte_size": 64}
    return [
        ("POST", "/v2/repository/index", b"{}"),
        ("POST", f"/v2/repository/models/{stranger}/load", load_body(stranger)),
        ("POST", f"/v2/repository/models/{model}/unload", b"{}"),
        ("GET", "/v2/systemsharedmemory/status", None),
        ("POST", "/v2/systemsharedmemory/region/sy_gate/register", json.dumps(shm).encode()),
        ("POST", "/v2/trace/setting", b'{"trace_level": ["TIMESTAMPS"]}'),
        ("POST", "/v2/logging", b'{"log_verbose_level": 3}'),
        ("GET", "/v2/models/stats", None),
        ("GET", f"/v2/models/{model}/stats", None),
        ("GET", f"/v2/models/{model}/config", None),
        ("GET", f"/v2/models/{model}/infer", None),  # a known path, the wrong method
        ("DELETE", f"/v2/models/{model}", None),
        ("GET", "/metrics", None),
    ]


def node_picture(nodes, model: str, stranger: str) -> list[tuple]:
    """What the calls above would change, read on each node directly."""
    picture = []
    for node in nodes:
        client, key = grpcclient.InferenceServerClient(node.grpc_url), grpc_key(node)
        try:
            index = client.get_model_repository_index(as_json=True, headers=key).get("models", [])
            picture.append(
                (
                    client.is_model_ready(model, "1") and client.is_model_ready(model, "2"),
                    any(entry.get("name") == stranger for entry in index),
                    client.get_log_settings(as_json=True, headers=key)["settings"][
                        "log_verbose_level"
                    ],
                    client.get_trace_settings(as_json=True, headers=key)["settings"]["trace_level"],
                    client.get_system_shared_memory_status(as_json=True, headers=key).get(
                        "regions", {}
                    ),
                )
            )
        finally:
            client.close()
    return picture


def refused_since(router: NginxRouter, since: float, expected: int) -> int:
    """The refusals the access log shows since `since`, once it shows `expected` (nginx
    writes a line when the request ends, so the last ones may lag the answers a moment)."""
    deadline = time.monotonic() + 10
    while True:
        lines, _ = last_lines(router.access_log_path, 1 << 20)
        count = refused_requests(lines, since)
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def test_http_control_calls_are_refused_by_nginx_and_leave_the_nodes_unchanged(
    router, model, triton_cluster
):
    stranger = f"gate_t{uuid.uuid4().hex[:6]}"
    before = node_picture(triton_cluster.nodes, model, stranger)
    assert all(row[0] and not row[1] for row in before)
    since = time.time() - 1.0
    calls = control_calls(model, stranger)
    for method, path, body in calls:
        status, content_type, answer = send(router.port, method, path, body)
        assert (status, content_type) == (403, "application/json"), (method, path, answer)
        assert json.loads(answer) == {
            "error": f"{REFUSED}{method} {path} is refused"
            + (" (GET only)" if method == "DELETE" else "")
            + (" (POST only)" if path.endswith("/infer") else "")
        }
    assert node_picture(triton_cluster.nodes, model, stranger) == before
    assert refused_since(router, since, len(calls)) == len(calls)


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/x/../../repository/index",
        "/v2/models/{model}/infer/../../../../repository/models/{model}/unload",
        "//v2/repository/index",
        "/v2/%72epository/index",
        "/v2/models/{model}%2Fversions%2F1/infer",
        "//v2/models/{model}/versions/1/infer",
        "/v2/models/{model}/./versions/1/infer",
    ],
)
def test_paths_in_another_form_are_refused_too(router, model, triton_cluster, path):
    """nginx decides on the normalised path but would pass the raw one on: a raw path that
    is not already plain is refused, whatever it normalises to."""
    path = path.format(model=model)
    status, content_type, answer = send(router.port, "POST", path, BODY)
    assert (status, content_type) == (403, "application/json"), answer
    assert json.loads(answer)["error"].startswith(REFUSED)
    assert node_picture(triton_cluster.nodes, model, "none")[0][0]  # still READY


def test_inference_readiness_and_metadata_still_pass(router, model):
    since = time.time() - 1.0
    infer = {
        f"/v2/models/{model}/infer": "1",  # the split, pinned to v1
        f"/v2/models/{model}/versions/2/infer": "2",
    }
    for path, version in infer.items():
        status, _, answer = send(router.port, "POST", path, BODY)
        assert status == 200 and json.loads(answer)["model_version"] == version, answer
    features = json.dumps({"FEATURES": [0.5] * 128}).encode()
    for path in (f"/v2/models/{model}/versions/1/generate", f"/v2/models/{model}/generate"):
        status, _, answer = send(router.port, "POST", path, features)
        assert status == 200 and "SCORE" in json.loads(answer), answer
    status, _, answer = send(router.port, "POST", f"/v2/models/{model}/generate_stream", features)
    assert status == 200 and b"SCORE" in answer, answer
    for path in (
        "/v2",
        "/v2/health/live",
        "/v2/health/ready",
        f"/v2/models/{model}",
        f"/v2/models/{model}/versions/1",
        f"/v2/models/{model}/ready",
        f"/v2/models/{model}/versions/2/ready",
    ):
        status, _, answer = send(router.port, "GET", path)
        if path == "/v2/health/ready":  # passed on: a node that saw any failed load answers 400
            assert status in (200, 400) and REFUSED.encode() not in answer, (path, answer)
        else:
            assert status == 200, (path, answer)
    assert json.loads(send(router.port, "GET", f"/v2/models/{model}")[2])["name"] == model
    lines, _ = last_lines(router.access_log_path, 1 << 20)
    assert refused_requests(lines, since) == 0
    counts = router_counts(lines)
    # The split: the unversioned infer, generate and generate_stream; versioned: the others.
    assert counts.split == {model: 3} and counts.versioned == {model: 2}


def test_grpc_model_control_is_refused_with_permission_denied(router, model, triton_cluster):
    stranger = f"gate_t{uuid.uuid4().hex[:6]}"
    before = node_picture(triton_cluster.nodes, model, stranger)
    since = time.time() - 1.0
    client = grpcclient.InferenceServerClient(router.grpc_listen)
    refusals = {
        "RepositoryIndex": lambda: client.get_model_repository_index(),
        "RepositoryModelLoad": lambda: client.load_model(
            stranger,
            config=example_config_json("risk_score", name=stranger, versions=[1]),
            files=example_files("risk_score", 1),
        ),
        "RepositoryModelUnload": lambda: client.unload_model(model),
        "ModelConfig": lambda: client.get_model_config(model),
        "ModelStatistics": lambda: client.get_inference_statistics(model),
        "LogSettings": lambda: client.update_log_settings({"log_verbose_level": 3}),
    }
    try:
        for method, call in refusals.items():
            with pytest.raises(InferenceServerException) as refused:
                call()
            assert refused.value.status() == "StatusCode.PERMISSION_DENIED", method
            expected = f"{REFUSED}POST /inference.GRPCInferenceService/{method} is refused"
            assert refused.value.message() == expected
        assert client.is_server_live()
        client.is_server_ready()  # passed on: False on a node that saw a failed load, not refused
        assert client.is_model_ready(model, "1")
        assert client.get_model_metadata(model).name == model
        features = grpcclient.InferInput("FEATURES", [1, 128], "FP32")
        features.set_data_from_numpy(np.full((1, 128), 0.5, dtype=np.float32))
        result = client.infer(model, [features], model_version="1", client_timeout=30)
        assert result.get_response().model_version == "1"
    finally:
        client.close()
    assert node_picture(triton_cluster.nodes, model, stranger) == before
    assert refused_since(router, since, len(refusals)) == len(refusals)
