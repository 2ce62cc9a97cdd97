"""The local Triton launcher against the real tritonserver binary from nvidia-pytriton."""

import dataclasses
import os
import secrets
import socket
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from integrations.triton import local as local_module
from integrations.triton.local import TritonLaunchError, start_cluster
from integrations.triton.restricted import NodeKey
from tests.conftest import wait_for
from tests.exampledata import EXAMPLES, example_config_json, example_files
from tests.nodes import grpc_key, http_key

pytestmark = pytest.mark.triton


def _load(node, model: str, *, name: str, version: int) -> None:
    client = grpcclient.InferenceServerClient(node.grpc_url)
    try:
        client.load_model(
            name,
            config=example_config_json(model, name=name, versions=[version]),
            files=example_files(model, version),
            headers=grpc_key(node),
            client_timeout=60,
        )
    finally:
        client.close()


def _http(node) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(
        node.http_url.removeprefix("http://"), network_timeout=30
    )


def _risk_request(features: np.ndarray) -> list:
    tensor = httpclient.InferInput("FEATURES", list(features.shape), "FP32")
    tensor.set_data_from_numpy(features.astype(np.float32))
    return [tensor]


def _expected_v2(features: np.ndarray) -> np.ndarray:
    w = np.load(EXAMPLES / "risk_score" / "2" / "weights.npz")
    hidden = np.maximum(features @ w["w1"] + w["b1"], 0.0)
    return 1.0 / (1.0 + np.exp(-(hidden @ w["w2"] + w["b2"])))


def test_two_nodes_start_and_serve_the_example_model_on_each(triton_cluster):
    assert len(triton_cluster.nodes) == 2
    features = np.random.default_rng(7).normal(size=(3, 128)).astype(np.float32)
    for node in triton_cluster.nodes:
        # The nodes are shared by the session: with strict readiness the server-wide
        # /v2/health/ready stays 400 after any earlier test's failed load (docs/TRITON.md),
        # so the launcher's promise is liveness; this test's own model is asked for per model.
        wait_for(node.is_live, timeout_s=30, what=f"{node.name} live", log=node.log_path)
        _load(node, "risk_score", name="risk_score_t1", version=2)
        client = _http(node)
        try:
            assert client.get_server_metadata()["version"] == "2.51.0"
            result = client.infer("risk_score_t1", _risk_request(features))
            assert result.get_response()["model_version"] == "2"
            scores = result.as_numpy("SCORE")
            assert scores.shape == (3, 1)
            np.testing.assert_allclose(scores[:, 0], _expected_v2(features), rtol=1e-5)
            client.unload_model("risk_score_t1", headers=http_key(node))
        finally:
            client.close()


def test_faulty_variant_fails_the_requests_its_bug_hits_and_triton_counts_them(triton_cluster):
    node = triton_cluster.nodes[0]
    _load(node, "risk_score", name="risk_score_faulty_t", version=3)
    rows = np.random.default_rng(11).normal(size=(60, 128)).astype(np.float32)
    expected_failures = int((rows[:, 0] > 0.8).sum())
    assert 0 < expected_failures < 30
    client = _http(node)
    try:
        failures = 0
        for row in rows:
            try:
                client.infer("risk_score_faulty_t", _risk_request(row[None, :]))
            except Exception as exc:  # tritonclient raises InferenceServerException
                assert "non-finite risk score" in str(exc)
                failures += 1
        assert failures == expected_failures
        stats = client.get_inference_statistics("risk_score_faulty_t")["model_stats"][0]
        assert int(stats["inference_stats"]["fail"]["count"]) == expected_failures
        client.unload_model("risk_score_faulty_t", headers=http_key(node))
    finally:
        client.close()


def test_slow_variant_scores_like_v2(triton_cluster):
    node = triton_cluster.nodes[1]
    _load(node, "risk_score", name="risk_score_slow_t", version=4)
    features = np.random.default_rng(3).normal(size=(2, 128)).astype(np.float32)
    client = _http(node)
    try:
        scores = client.infer("risk_score_slow_t", _risk_request(features)).as_numpy("SCORE")
        np.testing.assert_allclose(scores[:, 0], _expected_v2(features), atol=0.02)
        client.unload_model("risk_score_slow_t", headers=http_key(node))
    finally:
        client.close()


def test_text_model_labels_tickets(triton_cluster):
    node = triton_cluster.nodes[1]
    _load(node, "ticket_router", name="ticket_router_t", version=1)
    texts = np.array(
        [
            [b"I was charged twice for my subscription"],
            [b"the app crashes with an error"],
            [b"cannot login, password reset email never came"],
        ],
        dtype=np.object_,
    )
    tensor = httpclient.InferInput("TEXT", [3, 1], "BYTES")
    tensor.set_data_from_numpy(texts)
    client = _http(node)
    try:
        result = client.infer("ticket_router_t", [tensor])
        labels = [x.decode() for x in result.as_numpy("LABEL").reshape(-1)]
        assert labels == ["billing", "technical", "account"]
        assert np.all(result.as_numpy("CONFIDENCE") > 0.5)
        client.unload_model("ticket_router_t", headers=http_key(node))
    finally:
        client.close()


def test_port_in_use_is_one_clear_sentence(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        with pytest.raises(TritonLaunchError) as err:
            start_cluster(1, tmp_path, base_port=port)
        assert str(err.value).startswith(f"Port {port} is already in use on 127.0.0.1")
    finally:
        holder.close()


def test_node_that_fails_to_start_reports_its_log_tail_and_leaves_nothing(tmp_path):
    with pytest.raises(TritonLaunchError) as err:
        start_cluster(
            1, tmp_path, extra_args=["--model-repository=/nonexistent/repo"], start_timeout_s=60
        )
    message = str(err.value)
    assert "Triton node 'node1' exited during start" in message
    assert "/nonexistent/repo" in message  # the log tail names the cause


def test_stop_leaves_no_processes(tmp_path):
    cluster = start_cluster(1, tmp_path)
    node = cluster.nodes[0]
    _load(node, "risk_score", name="risk_score_stop_t", version=1)
    pgid = node.process.pid
    cluster.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)  # neither the server nor a python stub is left


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_stopped_or_killed_node_leaves_no_shared_memory_or_upload_folder_behind(tmp_path, how):
    """A python model's stub shares memory with the server through /dev/shm files, and a
    model loaded by upload lives in a folderXXXXXX of Triton's own in /tmp (the node's own
    /tmp where it may have one); a killed server (fault tests) or a stub ended by its
    group's signal never removes them, and a load that keeps an older version's stub makes
    folders no process names."""
    cluster = start_cluster(1, tmp_path)
    node = cluster.nodes[0]
    name = f"risk_score_shm_{how}"
    try:
        _load(node, "risk_score", name=name, version=1)
        _load(node, "risk_score", name=name, version=2)
        regions = local_module._shm_regions_of_group(node.process.pid)
        assert regions, "the loaded python model maps no shared memory"
        folders = node.upload_folders()
        # version 2's upload folder, and version 1's while its stub is still shutting down
        assert 1 <= len(folders) <= 2, folders
        assert any(Path(f, "2", "model.py").is_file() for f in folders), folders
        if node.private_tmp is not None:  # CAP_SYS_ADMIN: the node's /tmp is its own folder
            home_tmp = tmp_path / node.name / "tmp"
            assert all(Path(f).parent == home_tmp for f in folders), folders
        if how == "kill":
            cluster.kill(node)
    finally:
        cluster.stop()
    assert not [r for r in regions if Path(r).exists()]
    assert not [f for f in folders if Path(f).exists()]
    if node.private_tmp is not None:  # nor one that no stub named
        assert not list((tmp_path / node.name / "tmp").glob("folder*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs CAP_SYS_ADMIN")
def test_as_root_a_node_writes_uploads_into_its_own_tmp_and_sees_no_other_tmp_entry(tmp_path):
    """Model code runs in the node's own /tmp: the host's entries (a folder this test puts
    there) are out of its sight, and what Triton writes there never reaches the host's."""
    marker = Path(tempfile.mkdtemp(prefix="switchyard-host-"))
    try:
        with start_cluster(1, tmp_path) as cluster:
            node = cluster.nodes[0]
            assert node.private_tmp is not None
            inside = set(os.listdir(f"/proc/{node.process.pid}/root/tmp"))
            assert marker.name not in inside
            if tmp_path.parts[1] == "tmp":  # the entry holding the repository is bound in
                assert tmp_path.parts[2] in inside
            _load(node, "risk_score", name="risk_score_own_tmp", version=1)
            (folder,) = node.upload_folders()
            assert Path(folder).parent == tmp_path / node.name / "tmp"
            assert Path(folder, "1", "model.py").is_file()
    finally:
        marker.rmdir()
    assert not list((tmp_path / node.name / "tmp").glob("folder*"))


def test_a_node_started_with_a_key_restricts_control_and_never_logs_the_key(tmp_path):
    key = NodeKey("switchyard-node-key", secrets.token_urlsafe(32))
    with start_cluster(1, tmp_path, node_key=key) as cluster:
        node = cluster.nodes[0]
        assert node.node_key == key
        with pytest.raises(InferenceServerException, match="is restricted"):
            _load(_keyless(node), "risk_score", name="risk_score_key_t", version=1)
        _load(node, "risk_score", name="risk_score_key_t", version=1)  # with the key
        client = _http(node)
        try:
            assert client.is_model_ready("risk_score_key_t")  # readiness stays open
            client.unload_model("risk_score_key_t", headers=http_key(node))
        finally:
            client.close()
        log = node.log_path.read_text()
    assert "model_control_mode" in log and key.value not in log


def test_a_launch_failure_never_shows_the_key(tmp_path):
    key = NodeKey("switchyard-node-key", secrets.token_urlsafe(32))
    # Triton refuses a malformed restricted-API flag by echoing it: the key with it.
    bad = [f"--http-restricted-api=model-repository,{key.header}={key.value}"]
    with pytest.raises(TritonLaunchError) as err:
        start_cluster(1, tmp_path, node_key=key, extra_args=bad, start_timeout_s=60)
    assert "--http-restricted-api option format" in str(err.value)
    assert key.value not in str(err.value) and "<node key>" in str(err.value)


def _keyless(node):
    """The node as a caller that does not know its key sees it."""
    return dataclasses.replace(node, node_key=None)


def test_triton_local_refuses_an_unusable_key_file_without_showing_it(tmp_path):
    from django.core.management import CommandError, call_command

    short = tmp_path / "short-key"
    short.write_text("tiny-key\n")
    for path, why in ((tmp_path / "missing", "No such file"), (short, "16 to 256")):
        with pytest.raises(CommandError) as err:
            call_command("triton_local", nodes=1, key_file=str(path), work_dir=str(tmp_path))
        assert why in str(err.value) and "tiny-key" not in str(err.value)
