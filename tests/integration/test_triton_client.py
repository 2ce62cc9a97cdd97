"""TritonClient against the real tritonserver nodes of the session cluster.

Triton state is not rolled back between tests: every model name ends in `_cl<n>` and each
test unloads what it loaded. No test here pushes a python version dir without model.py to a
node (that load hangs forever and poisons the node, docs/TRITON.md §api).
"""

import http.client
import json
import shutil
import socket
import urllib.request

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from integrations.triton.client import IndexEntry, TritonClient
from integrations.triton.errors import PermanentTritonError, TransientTritonError, translate
from integrations.triton.inputs import generate_inputs
from integrations.triton.local import free_ports
from integrations.triton.probe import ModelProbe, probe_model
from tests.conftest import wait_for
from tests.exampledata import EXAMPLES, example_config_json, example_files
from tests.nodes import keyed_client

pytestmark = pytest.mark.triton

BROKEN_MODEL_PY = b"""
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("boom")

    def execute(self, requests):
        return []
"""


@pytest.fixture
def node(triton_cluster):
    return triton_cluster.nodes[0]


@pytest.fixture
def client(node):
    with keyed_client(
        node, timeout_s=10, load_timeout_s=60, metrics_url=node.metrics_url
    ) as triton:
        yield triton


def files_of(model: str, version: int, *, as_version: int | None = None) -> dict[str, bytes]:
    """The example files of one version as "<version>/<path>", optionally moved to another."""
    target = as_version if as_version is not None else version
    return {
        f"{target}/{key.removeprefix('file:').split('/', 1)[1]}": content
        for key, content in example_files(model, version).items()
    }


def config_of(model: str, *, name: str, versions: list[int], push_id: str | None = None) -> str:
    config = json.loads(example_config_json(model, name=name, versions=versions))
    if push_id is not None:
        config["parameters"] = {"PUSH_ID": {"string_value": push_id}}
    return json.dumps(config)


def push(client, model: str, *, name: str, version: int, push_id: str | None = None) -> None:
    client.load(
        name,
        config_json=config_of(model, name=name, versions=[version], push_id=push_id),
        files=files_of(model, version),
    )


def unload_and_wait(client, name: str) -> None:
    client.unload(name)
    client.wait_unloaded(name, timeout_s=30)


def expected_v2_scores(features: np.ndarray) -> np.ndarray:
    w = np.load(EXAMPLES / "risk_score" / "2" / "weights.npz")
    hidden = np.maximum(features @ w["w1"] + w["b1"], 0.0)
    return 1.0 / (1.0 + np.exp(-(hidden @ w["w2"] + w["b2"])))


def test_server_metadata_reports_version_and_model_repository_extension(client):
    info = client.server_metadata()
    assert info.version == "2.51.0"
    assert "model_repository" in info.extensions
    assert client.is_live()


def test_pushed_risk_score_answers_generated_inputs_with_its_version(client):
    push(client, "risk_score", name="risk_score_cl1", version=2)
    try:
        assert client.model_ready("risk_score_cl1")
        config = client.model_config("risk_score_cl1")
        inputs = generate_inputs(config, batch_size=3, seed=5)
        result = client.infer("risk_score_cl1", inputs)
        assert result.model_version == "2"
        assert result.latency_ms > 0
        assert result.outputs["SCORE"].shape == (3, 1)
        np.testing.assert_allclose(
            result.outputs["SCORE"][:, 0], expected_v2_scores(inputs["FEATURES"]), rtol=1e-5
        )
        stats = client.statistics("risk_score_cl1")
        assert [(s["version"], s["inference_count"]) for s in stats] == [("2", 3)]
    finally:
        unload_and_wait(client, "risk_score_cl1")


def test_pushed_ticket_router_labels_generated_texts(client):
    push(client, "ticket_router", name="ticket_router_cl1", version=1)
    try:
        inputs = generate_inputs(client.model_config("ticket_router_cl1"), batch_size=4, seed=1)
        assert inputs["TEXT"].dtype == np.object_
        result = client.infer("ticket_router_cl1", inputs, outputs=["LABEL"])
        assert set(result.outputs) == {"LABEL"}
        labels = {label.decode() for label in result.outputs["LABEL"].reshape(-1)}
        assert labels <= {"billing", "technical", "account", "other"}
        assert result.outputs["LABEL"].shape == (4, 1)
    finally:
        unload_and_wait(client, "ticket_router_cl1")


def test_pushed_models_are_absent_from_the_index_but_listed_as_loaded(client):
    push(client, "risk_score", name="risk_score_cl2", version=1)
    try:
        assert "risk_score_cl2" not in {entry.name for entry in client.repository_index()}
        assert client.loaded_models()["risk_score_cl2"] == {"1"}
    finally:
        unload_and_wait(client, "risk_score_cl2")
    assert "risk_score_cl2" not in client.loaded_models()


def test_disk_model_shows_in_the_index_until_unloaded(client, node):
    folder = node.repository / "risk_disk_cl1"
    shutil.copytree(EXAMPLES / "risk_score", folder, ignore=shutil.ignore_patterns("__pycache__"))
    config = (folder / "config.pbtxt").read_text()
    (folder / "config.pbtxt").write_text(config.replace('"risk_score"', '"risk_disk_cl1"'))
    latest = str(max(int(p.name) for p in folder.iterdir() if p.name.isdigit()))
    client.load("risk_disk_cl1")  # no policy: latest 1 -> the highest version folder
    try:
        assert IndexEntry("risk_disk_cl1", latest, "READY") in client.repository_index()
    finally:
        unload_and_wait(client, "risk_disk_cl1")
    unloaded = IndexEntry("risk_disk_cl1", latest, "UNAVAILABLE", "unloaded")
    assert unloaded in client.repository_index()


def test_same_config_repush_is_ignored_and_a_new_push_id_serves_the_new_bytes(client):
    name = "risk_push_cl1"
    first_config = config_of("risk_score", name=name, versions=[1], push_id="a")
    features = generate_inputs(json.loads(first_config), batch_size=2, seed=3)
    client.load(name, config_json=first_config, files=files_of("risk_score", 1))
    try:
        first = client.infer(name, features).outputs["SCORE"]
        v2_as_1 = files_of("risk_score", 2, as_version=1)
        same = config_of("risk_score", name=name, versions=[1], push_id="a")
        client.load(name, config_json=same, files=v2_as_1)
        np.testing.assert_array_equal(client.infer(name, features).outputs["SCORE"], first)
        changed = config_of("risk_score", name=name, versions=[1], push_id="b")
        client.load(name, config_json=changed, files=v2_as_1)
        result = client.infer(name, features)
        assert result.model_version == "1"
        np.testing.assert_allclose(
            result.outputs["SCORE"][:, 0], expected_v2_scores(features["FEATURES"]), rtol=1e-5
        )
        assert not np.allclose(result.outputs["SCORE"], first)
    finally:
        unload_and_wait(client, name)


def test_failed_initialize_is_permanent_with_its_reason_and_the_old_version_keeps_serving(
    client, tmp_path
):
    name = "risk_fail_cl1"
    push(client, "risk_score", name=name, version=1)
    broken = tmp_path / "model.py"
    broken.write_bytes(BROKEN_MODEL_PY)
    try:
        with pytest.raises(PermanentTritonError) as err:
            client.load(
                name,
                config_json=config_of("risk_score", name=name, versions=[2]),
                files={"2/model.py": broken.read_bytes()},
            )
        message = str(err.value)
        assert message.startswith(f"Could not load model '{name}' on Triton node {client.node}")
        assert message.splitlines()[0].endswith("RuntimeError: boom.")
        assert "boom" in err.value.reason and "initialize" in err.value.reason
        assert (err.value.operation, err.value.model) == ("load", name)
        assert err.value.status == "StatusCode.INVALID_ARGUMENT"
        assert client.model_ready(name, "1") and not client.model_ready(name, "2")
        result = client.infer(name, generate_inputs(client.model_config(name)))
        assert result.model_version == "1"
    finally:
        # A good load of version 2 clears the failed entry that keeps /v2/health/ready at 400.
        push(client, "risk_score", name=name, version=2)
        unload_and_wait(client, name)


def test_specific_version_readiness_follows_the_version_policy(client):
    name = "risk_ver_cl1"
    files = {**files_of("risk_score", 1), **files_of("risk_score", 2)}
    client.load(name, config_json=config_of("risk_score", name=name, versions=[1, 2]), files=files)
    try:
        client.wait_ready(name, ["1", 2], timeout_s=10)
        assert client.model_ready(name, "2") and client.model_ready(name, 1)
        assert not client.model_ready(name, "3")
        assert client.loaded_models()[name] == {"1", "2"}
        assert client.infer(name, generate_inputs(client.model_config(name))).model_version == "2"
        client.load(name, config_json=config_of("risk_score", name=name, versions=[1]), files=files)
        assert client.model_ready(name, "1") and not client.model_ready(name, "2")
        with pytest.raises(TransientTritonError) as err:
            client.wait_ready(name, ["2"], timeout_s=0.3)
        assert "version(s) 2 are not ready" in str(err.value)
    finally:
        unload_and_wait(client, name)


def test_probe_reads_readiness_loaded_versions_and_metrics_of_one_model(client, node):
    name = "risk_probe_cl1"
    assert probe_model(node.http_url, name, 1) == ModelProbe(False, frozenset(), None)
    files = {**files_of("risk_score", 1), **files_of("risk_score", 2)}
    client.load(name, config_json=config_of("risk_score", name=name, versions=[1, 2]), files=files)
    try:
        client.wait_ready(name, ["1", "2"], timeout_s=10)
        client.infer(name, generate_inputs(client.model_config(name)), version=1)
        counted = f'nv_inference_request_success{{model="{name}",version="1"}} 1'
        probes = []

        def probe_counted():
            # Triton counts a request when the backend releases it, which can be just after
            # the client has its answer: read again until the count shows
            probes.append(probe_model(node.http_url, name, 2, metrics_url=node.metrics_url))
            return counted in (probes[-1].metrics or "")

        try:
            wait_for(probe_counted, timeout_s=30, what="the request counted")
        except RuntimeError:
            text = probes[-1].metrics or ""
            lines = [ln for ln in text.splitlines() if "request_success" in ln]
            pytest.fail(f"{counted!r} never read; the last probe's success lines: {lines}")
        seen = probes[-1]
        assert seen.ready and seen.loaded == {"1", "2"}
        assert not probe_model(node.http_url, name, 3).ready
        assert probe_model(node.http_url, "risk", 1).loaded == frozenset()  # a name's prefix
    finally:
        unload_and_wait(client, name)
    assert probe_model(node.http_url, name, 2).loaded == frozenset()


def test_probe_of_a_node_that_is_down_is_transient():
    (port,) = free_ports(1)
    with pytest.raises(TransientTritonError, match="connection refused") as err:
        probe_model(f"http://127.0.0.1:{port}", "risk_score", 1, timeout_s=1)
    assert err.value.node == f"127.0.0.1:{port}" and err.value.operation == "probe"


def test_unload_stops_serving_at_once_and_wait_unloaded_sees_the_drain(client, node):
    name = "risk_unload_cl1"
    push(client, "risk_score", name=name, version=1)
    client.unload(name)
    assert not client.model_ready(name)
    client.wait_unloaded(name, timeout_s=30)
    assert name not in client.loaded_models()
    with urllib.request.urlopen(node.metrics_url, timeout=10) as answer:  # noqa: S310 - http
        metrics = answer.read().decode()
    assert not [
        line
        for line in metrics.splitlines()
        if line.startswith("nv_inference_count{") and f'model="{name}"' in line
    ]


def test_infer_against_an_unknown_model_is_permanent(client):
    with pytest.raises(PermanentTritonError) as err:
        client.infer("no_such_model_cl1", {"X": np.zeros((1, 4), np.float32)})
    assert err.value.status == "404"
    assert (err.value.operation, err.value.model) == ("infer", "no_such_model_cl1")
    assert str(err.value) == (
        f"Could not run inference on model 'no_such_model_cl1' on Triton node {client.node} "
        "(HTTP 404): Request for unknown model: 'no_such_model_cl1' is not found."
    )


def test_invalid_pushed_config_is_permanent_and_says_to_look_in_the_server_log(client):
    config = json.loads(config_of("risk_score", name="risk_bad_cl1", versions=[1]))
    config["name"] = "another_name"  # config name != URL name: Triton cannot poll it
    with pytest.raises(PermanentTritonError) as err:
        client.load("risk_bad_cl1", config_json=json.dumps(config), files=files_of("risk_score", 1))
    assert "failed to poll from model repository" in str(err.value)
    assert "server log" in str(err.value)


@pytest.mark.timeout(60)
def test_node_not_listening_is_transient():
    (port,) = free_ports(1)
    with TritonClient(f"http://127.0.0.1:{port}", timeout_s=2, load_timeout_s=2) as dead:
        assert not dead.is_live()
        calls = [
            lambda: dead.model_ready("risk_score"),
            dead.repository_index,
            lambda: dead.infer("risk_score", {"X": np.zeros((1, 4), np.float32)}),
            lambda: dead.load("risk_score"),
            lambda: dead.unload("risk_score"),
        ]
        for call in calls:
            with pytest.raises(TransientTritonError) as err:
                call()
            assert err.value.node == f"http://127.0.0.1:{port}"
    assert "connection refused" in str(err.value) or "UNAVAILABLE" in str(err.value)


@pytest.mark.timeout(60)
def test_node_that_never_answers_is_transient_after_the_timeout():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts connections, never answers
    try:
        port = silent.getsockname()[1]
        with TritonClient(f"127.0.0.1:{port}", timeout_s=0.5) as slow:
            with pytest.raises(TransientTritonError) as err:
                slow.model_ready("risk_score")
        assert "no answer within the client timeout" in str(err.value)
    finally:
        silent.close()


def test_python_dir_without_model_py_is_refused_before_it_reaches_the_node():
    (port,) = free_ports(1)  # nothing listens: the refusal must come from the client
    config = config_of("risk_score", name="risk_hang_cl1", versions=[1])
    with TritonClient(f"127.0.0.1:{port}") as triton:
        with pytest.raises(PermanentTritonError) as err:
            triton.load("risk_hang_cl1", config_json=config, files={"1/weights.npz": b"x"})
    assert "have no model.py" in str(err.value)
    # A native warm-up's input file is not a version dir; any other folder is refused.
    with TritonClient(f"127.0.0.1:{port}") as triton:
        with pytest.raises(PermanentTritonError, match=r"dir\(s\) 1 have no model.py"):
            triton.load(
                "risk_hang_cl1",
                config_json=config,
                files={"warmup/switchyard_0": b"x", "1/weights.npz": b"x"},
            )
        with pytest.raises(ValueError, match="warmup/<file>"):
            triton.load("risk_hang_cl1", config_json=config, files={"data/x.bin": b"x"})


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            InferenceServerException("m version 1 is not at ready state", "503"),
            TransientTritonError,
        ),
        (
            InferenceServerException("failed to connect", "StatusCode.UNAVAILABLE"),
            TransientTritonError,
        ),
        (
            InferenceServerException("Deadline Exceeded", "StatusCode.DEADLINE_EXCEEDED"),
            TransientTritonError,
        ),
        (ConnectionResetError(104, "Connection reset by peer"), TransientTritonError),
        (TimeoutError("timed out"), TransientTritonError),
        (InferenceServerException("load failed for model 'm': x", "400"), PermanentTritonError),
        (InferenceServerException("unknown model", "StatusCode.NOT_FOUND"), PermanentTritonError),
        (
            InferenceServerException("load failed", "StatusCode.INVALID_ARGUMENT"),
            PermanentTritonError,
        ),
        (
            InferenceServerException("failed to poll from model repository", "500"),
            PermanentTritonError,
        ),
        (InferenceServerException("url should not include the scheme"), PermanentTritonError),
    ],
)
def test_errors_map_to_transient_or_permanent_by_status_and_cause(error, kind):
    mapped = translate(error, node="http://n:8000", operation="load", model="m")
    assert type(mapped) is kind
    assert str(mapped).startswith("Could not load model 'm' on Triton node http://n:8000")


# ---------------------------------------------------------------- restricted APIs


def _raw_http(node, method: str, path: str, headers: dict | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", node.http_port, timeout=10)
    try:
        conn.request(method, path, body=b"{}", headers=headers or {})
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_restricted_node_refuses_model_control_over_http_without_its_key(node):
    key = node.node_key
    wrong = {key.header: "not-the-key-of-this-node"}
    for path in ("/v2/repository/index", "/v2/repository/models/risk_nokey_cl1/load"):
        assert _raw_http(node, "POST", path) == 403
        assert _raw_http(node, "POST", path, wrong) == 403
    assert _raw_http(node, "POST", "/v2/repository/index", key.http_headers()) == 200
    # What is not restricted stays open: health, metadata, statistics, inference.
    assert _raw_http(node, "GET", "/v2/health/live") == 200
    assert _raw_http(node, "GET", "/v2/models/stats") == 200


def test_a_restricted_node_refuses_model_control_over_grpc_without_its_key(node):
    import tritonclient.grpc as grpcclient

    raw = grpcclient.InferenceServerClient(node.grpc_url)
    try:
        for headers in (None, {node.node_key.header: node.node_key.value}):
            with pytest.raises(InferenceServerException, match="is restricted") as err:
                raw.get_model_repository_index(headers=headers)
            assert err.value.status() == "StatusCode.UNAVAILABLE"
            with pytest.raises(InferenceServerException, match="is restricted"):
                raw.unload_model("risk_nokey_cl1", headers=headers)
        assert raw.get_model_repository_index(headers=node.node_key.grpc_headers()) is not None
    finally:
        raw.close()


def test_without_the_key_control_calls_fail_permanently_saying_which_header(node):
    with TritonClient(node.http_url, node.grpc_url, timeout_s=10) as keyless:
        calls = [
            keyless.repository_index,
            lambda: keyless.unload("risk_nokey_cl1"),
            lambda: keyless.load(
                "risk_nokey_cl1",
                config_json=config_of("risk_score", name="risk_nokey_cl1", versions=[1]),
                files=files_of("risk_score", 1),
            ),
        ]
        for call in calls:
            with pytest.raises(PermanentTritonError) as err:
                call()
            message = str(err.value)
            assert node.node_key.header in message and "api_key" in message
            assert node.node_key.value not in message
        assert keyless.is_live()  # health stays open
    assert "risk_nokey_cl1" not in {e.name for e in keyed_client(node).repository_index()}


def test_the_client_sends_the_key_on_load_index_and_unload(client, node):
    config = config_of("risk_score", name="risk_keyed_cl1", versions=[1])
    client.load("risk_keyed_cl1", config_json=config, files=files_of("risk_score", 1))
    try:
        client.wait_ready("risk_keyed_cl1", [1], timeout_s=60)
        assert client.repository_index() is not None
    finally:
        client.unload("risk_keyed_cl1")
        client.wait_unloaded("risk_keyed_cl1")
    assert node.node_key.value not in repr(node.node_key) + repr(node)
