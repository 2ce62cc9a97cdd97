"""Filesystem push never follows a symbolic link planted in the shared model repository.

Model code on a node that shares the repository folder can write there; a link it plants at
the model folder or anywhere below must not lead the control plane to write or remove
anything outside the repository roots. No Triton node is needed: the push is refused while
the repository is written, before any node is contacted.
"""

import os

import pytest

from deployments.executor import deployment_run
from deployments.services import cluster_create, deployment_create, node_create
from models_registry.services import model_create, team_create
from tests.registry.archives import register_risk_score_as

pytestmark = pytest.mark.django_db


def _snapshot(folder) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


@pytest.fixture
def world(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    repository, outside = tmp_path / "repo", tmp_path / "outside"
    repository.mkdir()
    (outside / "1").mkdir(parents=True)
    (outside / "keep.txt").write_bytes(b"not the control plane's")
    (outside / "1" / "keep.txt").write_bytes(b"nor this")
    settings.SWITCHYARD_REPOSITORY_ROOTS = [str(repository)]
    rita, ada = make_user("rita", role="release-managers"), make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="scorer", team="fraud", actor=ada)
    cluster = cluster_create(
        actor=rita,
        name="fs",
        environment="staging",
        push_mode="filesystem",
        router={"driver": "none"},
        repository_path=str(repository),
    )
    node_create(cluster=cluster, actor=rita, name="n1", http_url="http://127.0.0.1:9")
    version = register_risk_score_as(model, ada, 1)
    return {
        "rita": rita,
        "cluster": cluster,
        "version": version,
        "repo": repository,
        "outside": outside,
    }


@pytest.mark.parametrize(
    "planted",
    ["scorer", "scorer/1", "scorer/1/.switchyard-digest", "scorer/warmup", "scorer/config.pbtxt"],
)
def test_a_planted_link_fails_the_push_and_nothing_outside_changes(world, planted):
    repository, outside = world["repo"], world["outside"]
    link = repository / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    target = outside / "keep.txt" if planted.endswith((".switchyard-digest", ".pbtxt")) else outside
    os.symlink(target, link)
    before = _snapshot(outside)
    deployment = deployment_create(
        cluster=world["cluster"], version=world["version"], actor=world["rita"]
    )
    deployment = deployment_run(deployment_id=deployment.pk)
    assert deployment.status == "failed"
    assert str(link) in deployment.error and "symbolic link" in deployment.error
    assert _snapshot(outside) == before  # nothing written or removed there
    assert link.is_symlink()  # the link itself is left for the operator to see


def test_without_links_the_repository_is_written(world):
    deployment = deployment_create(
        cluster=world["cluster"], version=world["version"], actor=world["rita"]
    )
    deployment_run(deployment_id=deployment.pk)  # the node is not there: the load fails
    folder = world["repo"] / "scorer"
    assert (folder / "1" / ".switchyard-digest").read_text() == world["version"].digest
    assert (folder / "config.pbtxt").is_file()
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]
