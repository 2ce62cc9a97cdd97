"""Changing a model's serving set touches only the versions that change, on a real node.

A release adds its candidate next to the baseline under live traffic and later retires the
baseline. If either push restarted the version that stays, its traffic would pay for a new
python stub on every step. The python backend runs one stub process per loaded version
instance, so the test watches those processes on the local node. In filesystem mode the
stub would also write `__pycache__` into the version folder during its load, which Triton
takes for a changed version at the next load (push.materialize prevents that).
"""

import os
import time
from pathlib import Path

import numpy as np
import pytest

from deployments import push
from deployments.services import cluster_create, node_create
from integrations.triton.local import start_cluster
from models_registry.services import model_create, team_create
from tests.conftest import session_node_key
from tests.nodes import keyed_client
from tests.registry.archives import register_risk_score_as

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


def _stubs(server_pid: int) -> dict[int, str]:
    """pid -> model.py path of every python backend stub the server `server_pid` started
    (other servers of the machine, another xdist worker's too, have stubs of their own)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent != server_pid:
            continue
        if argv and argv[0].endswith(b"triton_python_backend_stub") and len(argv) > 1:
            found[int(entry.name)] = argv[1].decode()
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _registered(node, actor):
    """The local node as a node row of a cluster holding its key (what push talks to)."""
    cluster = cluster_create(
        actor=actor,
        name="keep-running",
        environment="staging",
        router={"driver": "none"},
        api_key=node.node_key.value,
    )
    urls = {"http_url": node.http_url, "grpc_url": node.grpc_url, "metrics_url": node.metrics_url}
    return node_create(cluster=cluster, actor=actor, name=node.name, **urls)


def _apply(node, versions, *, warm, repository=None):
    plan = push.build_plan(versions, upload=repository is None)
    if repository is not None:
        push.materialize(str(repository), versions, plan)
    outcome = push.apply_on_node(node, plan, warm_version=warm)
    assert outcome.ok, outcome.error


def _score(node, model: str, version: int) -> np.ndarray:
    with keyed_client(node) as client:
        features = np.zeros((1, 128), dtype=np.float32)
        return client.infer(model, {"FEATURES": features}, version=version).outputs["SCORE"]


@pytest.fixture(params=["upload", "filesystem"])
def target(request, triton_cluster, tmp_path_factory):
    """(node, repository): a shared node for upload mode; a node of its own serving a
    repository folder for filesystem mode."""
    if request.param == "upload":
        yield triton_cluster.nodes[0], None
        return
    work = tmp_path_factory.mktemp("fs-node")
    repository = work / "repository"
    repository.mkdir()
    with start_cluster(
        1, work, extra_args=[f"--model-repository={repository}"], node_key=session_node_key()
    ) as own:
        yield own.nodes[0], repository


def test_adding_and_retiring_a_version_leaves_the_other_one_running(
    target, settings, tmp_path, make_user
):
    local, repository = target
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    node = _registered(local, make_user("rita", role="release-managers"))
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="keep_running", team="fraud", actor=ada)
    v1 = register_risk_score_as(model, ada, 1)
    v2 = register_risk_score_as(model, ada, 2)
    server = local.process.pid
    try:
        before = set(_stubs(server))
        _apply(node, [v1], warm=1, repository=repository)
        baseline = {pid: path for pid, path in _stubs(server).items() if pid not in before}
        assert baseline and all(path.endswith("/1/model.py") for path in baseline.values())

        # What a release's LOADING step pushes.
        _apply(node, [v1, v2], warm=2, repository=repository)
        now = _stubs(server)
        assert all(_alive(pid) and now.get(pid) == path for pid, path in baseline.items()), (
            "adding the candidate restarted the baseline's stub"
        )
        candidate = {
            pid: path for pid, path in now.items() if pid not in before and pid not in baseline
        }
        assert candidate and all(path.endswith("/2/model.py") for path in candidate.values())
        assert _score(local, "keep_running", 1).shape == (1, 1)

        # What promotion pushes once the baseline is drained.
        _apply(node, [v2], warm=2, repository=repository)
        assert all(_alive(pid) for pid in candidate), "retiring v1 restarted v2's stub"
        with keyed_client(local) as client:
            deadline = time.monotonic() + 15
            while client.loaded_models().get("keep_running") != {"2"}:
                assert time.monotonic() < deadline, client.loaded_models().get("keep_running")
                time.sleep(0.2)
        if repository is not None:  # the stub could not write bytecode next to model.py
            assert (repository / "keep_running" / "2" / "__pycache__").is_file()
    finally:
        with keyed_client(local) as client:
            client.unload("keep_running")
