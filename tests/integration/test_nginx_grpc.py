"""gRPC through the nginx router: a real nginx with a gRPC (http2) listener in front of the two
real Triton nodes of the session. gRPC is passed through, never split by version (nginx cannot
read the protobuf body): Triton answers an unversioned gRPC call with its highest READY
version even while the HTTP split pins every HTTP request to version 1."""

import http.client
import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from integrations.routers import ModelRoute, RouterState
from integrations.routers.access_log import last_lines, router_counts
from integrations.routers.nginx import NginxRouter
from integrations.triton.local import free_ports
from releases.unrouted import UnroutedMeasure
from tests.conftest import wait_for
from tests.integration.test_nginx_router import risk_pair  # noqa: F401 - the `model` fixture

pytestmark = pytest.mark.triton

FEATURES = np.linspace(0.0, 1.27, 128, dtype=np.float32).reshape(1, 128)


@pytest.fixture
def router(tmp_path):
    """An nginx router with HTTP and gRPC listeners of this test's own, always stopped."""
    http_port, grpc_port = free_ports(2)
    driver = NginxRouter(
        prefix_dir=tmp_path / "nginx",
        listen=f"127.0.0.1:{http_port}",
        grpc_listen=f"127.0.0.1:{grpc_port}",
    )
    try:
        yield driver
    finally:
        driver.stop()


def grpc_infer(address: str, model: str, n: int) -> list[str]:
    """`n` unversioned gRPC inferences; the version that answered each."""
    client = grpcclient.InferenceServerClient(address)
    try:
        versions = []
        for _ in range(n):
            features = grpcclient.InferInput("FEATURES", [1, 128], "FP32")
            features.set_data_from_numpy(FEATURES)
            result = client.infer(model, [features], client_timeout=30)
            versions.append(result.get_response().model_version)
        return versions
    finally:
        client.close()


def http_infer(port: int, model: str) -> str:
    body = json.dumps(
        {
            "inputs": [
                {
                    "name": "FEATURES",
                    "datatype": "FP32",
                    "shape": [1, 128],
                    "data": FEATURES.ravel().tolist(),
                }
            ]
        }  # fmt: skip
    )
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST", f"/v2/models/{model}/infer", body, {"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        assert response.status == 200
        return json.loads(response.read())["model_version"]
    finally:
        conn.close()


def triton_requests(nodes, model: str) -> int:
    """Triton's own count of the model's requests (success + failure), summed over nodes."""
    total = 0
    for node in nodes:
        client = grpcclient.InferenceServerClient(node.grpc_url)
        try:
            stats = client.get_inference_statistics(model, as_json=True)
        finally:
            client.close()
        for version in stats.get("model_stats", []):
            infer = version.get("inference_stats", {})
            for key in ("success", "fail"):
                total += int(infer.get(key, {}).get("count", 0))
    return total


def test_grpc_through_the_router_reaches_triton_unsplit_and_is_logged(
    router, model, triton_cluster
):
    nodes = triton_cluster.nodes
    state = RouterState(
        [n.http_url for n in nodes],
        [ModelRoute(model, {1: 100.0, 2: 0.0})],  # HTTP pinned to version 1
        grpc_upstreams=[n.grpc_url for n in nodes],
    )
    router.apply(state)
    assert router.current() == state
    before = triton_requests(nodes, model)

    versions = grpc_infer(router.grpc_listen, model, 12)
    assert http_infer(router.port, model) == "1"

    # gRPC is not split: Triton answered every call with its highest READY version.
    assert set(versions) == {"2"}
    # Triton counts a request when its backend releases it, after the response: the last one
    # may be counted a moment after the client read it (docs/TRITON.md).
    counted = wait_for(lambda: (triton_requests(nodes, model) - before) >= 13 or None,
                       timeout_s=5, what="Triton to count the 13 requests")  # fmt: skip
    assert counted and triton_requests(nodes, model) - before == 13

    # nginx writes a request's access-log line after it has sent the response, so the
    # client can read its answer before the line is there: wait for all 13 lines.
    def logged():
        lines, _ = last_lines(router.access_log_path, 1 << 20)
        counts = router_counts(lines)
        return counts if counts.grpc + sum(counts.split.values()) >= 13 else None

    counts = wait_for(
        logged,
        timeout_s=30,
        what="13 inference lines in the router log",
        log=router.access_log_path,
    )
    assert counts.grpc == 12
    assert counts.split == {model: 1}
    # Seen from the split, 12 of those 13 requests went around it.
    measure = UnroutedMeasure.of(13, counts.split[model])
    assert measure.share == pytest.approx(12 / 13)
    assert "gRPC clients" in measure.text()


def test_grpc_listener_without_nodes_answers_unavailable(router, model):
    router.apply(RouterState([], [], grpc_upstreams=[]))
    with pytest.raises(InferenceServerException) as refused:
        grpc_infer(router.grpc_listen, model, 1)
    assert "UNAVAILABLE" in str(refused.value.status()) or "503" in str(refused.value)
