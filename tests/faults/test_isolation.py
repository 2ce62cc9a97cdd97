"""One bad row never stops the rest: a rollup row PostgreSQL can never store is dead-lettered
while the others are written; a release whose tick fails is recorded as failing and the
others tick on; a cluster whose reconcile fails leaves the other clusters reconciled."""

import logging
import time

import pytest

from deployments.services import cluster_create
from releases.models import Release
from releases.services import release_create
from releases.tasks import tick
from telemetry.models import Rollup
from telemetry.rollups import RollupRow
from telemetry.services import rollups_write
from telemetry.status import collector_status_read
from tests.release_setup import release_world


@pytest.mark.django_db(transaction=True)
def test_a_rollup_row_that_can_never_be_written_is_dead_lettered_and_the_rest_stored(
    make_user, caplog
):
    rita = make_user("rita", role="release-managers")
    cluster_create(actor=rita, name="roll", environment="staging", router={"driver": "none"})
    minute = (time.time() // 60 - 1) * 60
    good = RollupRow("roll", "n1", "risk_score", "1", minute, requests=10, successes=10)
    too_long = RollupRow("roll", "n1", "m" * 300, "1", minute, requests=3, successes=3)
    node_row = RollupRow("roll", "n1", "", "", minute, cpu_util_avg=0.5)
    before = collector_status_read().rollups_dead_lettered
    with caplog.at_level(logging.ERROR):
        assert rollups_write(rows=[good, too_long, node_row]) == 2
    assert "dead-lettered" in caplog.text and "m" * 300 in caplog.text
    stored = sorted(Rollup.objects.values_list("model_name", "requests"))
    assert stored == [("", 0), ("risk_score", 10)]
    assert collector_status_read().rollups_dead_lettered == before + 1
    # Written again (a restarted collector), the good minute adds up; nothing raises.
    assert rollups_write(rows=[good]) == 1
    assert Rollup.objects.get(model_name="risk_score").requests == 20


@pytest.mark.django_db
def test_a_release_whose_tick_fails_is_recorded_and_never_stops_another(
    make_user, monkeypatch, caplog, tmp_path
):
    from integrations.triton.local import free_ports
    from releases import routing

    world = release_world(make_user)
    (port,) = free_ports(1)
    second = cluster_create(
        actor=world["rita"],
        name="prod2",
        environment="production",
        router={
            "driver": "nginx",
            "listen": f"127.0.0.1:{port}",
            "prefix_dir": str(tmp_path / "router"),
        },
    )
    try:
        _tick_both(world, second, monkeypatch, caplog)
    finally:  # the healthy release's tick started its router
        routing.router_for(second).stop()
        routing._DRIVERS.clear()


def _tick_both(world, second, monkeypatch, caplog):
    from deployments.services import node_create, serving_state_set

    serving_state_set(cluster=second, model=world["model"], versions=[world["versions"][0]])
    node_create(cluster=second, actor=world["rita"], name="n1", http_url="http://127.0.0.1:9")
    failing, healthy = (
        release_create(cluster=c, candidate=world["versions"][1], actor=world["rita"])
        for c in (world["cluster"], second)
    )
    import releases.tick as tick_module

    real = tick_module.release_tick

    def tick_or_fail(*, release_id):  # the fault: this release's tick raises mid-way
        if release_id == failing.pk:
            raise OSError(28, "No space left on device")
        return real(release_id=release_id)

    monkeypatch.setattr(tick_module, "release_tick", tick_or_fail)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            for release in (failing, healthy):
                tick.apply(args=[release.pk]).get()  # the task itself: it never raises
    assert "tick of release" in caplog.text and "No space left" in caplog.text
    (event,) = failing.events.filter(kind="error")  # once, though it failed three times
    assert "No space left on device" in event.message and event.phase == "PENDING"
    assert not healthy.events.filter(kind="error").exists()
    healthy = Release.objects.get(pk=healthy.pk)
    assert healthy.revision > 0 or healthy.phase != "PENDING"  # it was ticked


@pytest.mark.triton
@pytest.mark.django_db
def test_a_cluster_whose_reconcile_fails_leaves_the_others_reconciled(
    make_user, fault_node, settings, tmp_path, caplog
):
    from deployments.models import TritonNode
    from deployments.reconcile import cluster_reconcile
    from deployments.services import node_create, serving_state_set
    from deployments.tasks import reconcile_all
    from models_registry.models import ModelVersion
    from models_registry.services import model_create, team_create
    from tests.registry.archives import register_risk_score_as

    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    rita, ada = make_user("rita", role="release-managers"), make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="junk_config", team="fraud", actor=ada)
    version = register_risk_score_as(model, ada, 1)
    broken = cluster_create(actor=rita, name="a-broken", environment="staging", router={})
    node_create(
        cluster=broken,
        actor=rita,
        name=fault_node.name,
        http_url=fault_node.http_url,
        grpc_url=fault_node.grpc_url,
    )
    serving_state_set(cluster=broken, model=model, versions=[version])
    # A row written before today's checks: a stored config that is no Triton config at all.
    ModelVersion.objects.filter(pk=version.pk).update(config_json=["not", "a", "config"])
    fine = cluster_create(actor=rita, name="b-fine", environment="staging", router={})
    node_create(cluster=fine, actor=rita, name="n1", http_url="http://127.0.0.1:9")
    with pytest.raises(Exception) as raised:  # the fault is real: this cluster's pass raises
        cluster_reconcile(cluster=broken)
    with caplog.at_level(logging.ERROR):
        reconcile_all()  # clusters go by name: the broken one first
    assert "reconcile of cluster a-broken failed" in caplog.text
    assert type(raised.value).__name__ in caplog.text
    node = TritonNode.objects.get(cluster=fine)
    assert node.health == TritonNode.Health.DOWN  # reconciled: nothing listens on port 9
