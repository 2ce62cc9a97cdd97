"""The leak watch on real Triton nodes: a model that leaves a file in /dev/shm on every load
(memory outside its stub that no unload gives back) gets its node flagged after N cycles of
deploy and unload through the control plane; a clean model's node does not."""

import glob
import os
import uuid

import pytest

from deployments.push import client_for
from deployments.services import cluster_create, deployment_create
from health.models import Alert, MemorySample
from health.watch import cluster_health_pass
from integrations.triton.memory import node_memory
from models_registry.services import model_create, team_create
from tests.conftest import wait_for
from tests.deploying import pushed
from tests.health.models import LEAKY, register_python
from tests.nodes import register_nodes

pytestmark = [pytest.mark.triton, pytest.mark.django_db]
CYCLES, LEAK_MIB = 5, 128
SHM = "/dev/shm"  # noqa: S108 - where the model under test leaks, cleaned up after


@pytest.fixture
def leak_world(triton_cluster, settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    settings.SWITCHYARD_DEPLOY_DRAIN_S = 0.2
    settings.SWITCHYARD_LEAK_CYCLES = CYCLES
    # Above what other work on a shared host moved used memory in five cycles (~300 MiB).
    settings.SWITCHYARD_LEAK_THRESHOLD_MIB = 4 * LEAK_MIB
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    clusters = []
    for name, node in zip(("leaky", "clean"), triton_cluster.nodes, strict=False):
        cluster = cluster_create(actor=rita, name=name, environment="production")
        register_nodes(cluster, [node], actor=rita)
        clusters.append(cluster)
    prefix = f"sy-leaktest-{uuid.uuid4().hex[:8]}"
    try:
        yield {"rita": rita, "ada": ada, "clusters": clusters, "prefix": prefix}
    finally:
        for path in glob.glob(f"{SHM}/{prefix}-*"):
            os.unlink(path)


def _host_gauge(node) -> int | None:
    return node_memory(node.http_url, node.metrics_url).host_bytes


def _gauge_refreshed(node) -> None:
    """Wait until Triton has refreshed its memory gauges (every second) since now: the host
    memory it reports moved (used host memory moves by some bytes between any two polls)."""
    seen = _host_gauge(node)
    wait_for(
        lambda: (now := _host_gauge(node)) is not None and now != seen,
        timeout_s=60,
        what=f"{node.name}'s memory gauges refreshed (reads {seen})",
    )


def _cycles(world, cluster, source: str) -> str:
    name = f"{cluster.name}_{uuid.uuid4().hex[:6]}"
    model = model_create(name=name, team="fraud", actor=world["ada"])
    version = register_python(model, world["ada"], source)
    node = cluster.nodes.get()
    for _ in range(CYCLES):
        load = deployment_create(cluster=cluster, version=version, actor=world["rita"])
        pushed(load)
        _gauge_refreshed(node)  # the unload's "before" reads the loaded model's memory
        unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
        pushed(unload)
        with client_for(node) as client:  # the cluster's key, as the control plane calls
            client.wait_unloaded(name, timeout_s=60)  # the unload finishes asynchronously
        _gauge_refreshed(node)
    return name


def test_a_node_whose_unloads_never_give_memory_back_is_flagged_and_a_clean_one_is_not(
    leak_world,
):
    leaky_cluster, clean_cluster = leak_world["clusters"]
    clean = _cycles(leak_world, clean_cluster, LEAKY.format(leak_mib=0, prefix="unused"))
    leaky = _cycles(
        leak_world, leaky_cluster, LEAKY.format(leak_mib=LEAK_MIB, prefix=leak_world["prefix"])
    )
    assert len(glob.glob(f"{SHM}/{leak_world['prefix']}-*")) == CYCLES
    for cluster, model in ((leaky_cluster, leaky), (clean_cluster, clean)):
        samples = MemorySample.objects.filter(model_name=model)
        assert samples.filter(operation="load").count() == CYCLES
        assert samples.filter(operation="unload").count() == CYCLES
        assert all(s.after_rss_bytes and s.after_shm_bytes for s in samples), _samples(model)
        # A fresh server's gauge reads 0 until its first poll: the unloads come later.
        assert all(s.after_host_bytes for s in samples.filter(operation="unload")), _samples(model)
        cluster_health_pass(cluster=cluster)

    flagged = Alert.objects.filter(kind="leak_suspected", cluster=leaky_cluster).first()
    assert flagged is not None, _samples(leaky)
    assert (
        flagged.state == "firing"
        and flagged.node_name == leak_world["clusters"][0].nodes.get().name
    )
    assert flagged.details["models"] == [leaky]
    assert flagged.details["rise_bytes"] > 4 * LEAK_MIB * 1024 * 1024
    assert "LD_PRELOAD" in flagged.details["remedy"] and leaky in flagged.summary
    wrong = Alert.objects.filter(kind="leak_suspected", cluster=clean_cluster)
    assert not wrong.exists(), ([a.details for a in wrong], _samples(clean))


def _samples(model: str) -> str:
    """The samples as a table, to tell a leak missed from noise when the test fails."""
    rows = MemorySample.objects.filter(model_name=model).order_by("created_at", "id")
    mib = lambda v: None if v is None else round(v / 2**20)  # noqa: E731
    return "\n".join(
        f"{s.operation:6} host {mib(s.before_host_bytes)} -> {mib(s.after_host_bytes)} "
        f"rss {mib(s.before_rss_bytes)} -> {mib(s.after_rss_bytes)} "
        f"shm {mib(s.before_shm_bytes)} -> {mib(s.after_shm_bytes)}"
        for s in rows
    )
