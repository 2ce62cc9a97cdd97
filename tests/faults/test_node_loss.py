"""A Triton node killed while a release holds 20 % of the traffic, then restarted empty: real
nodes, a real nginx router, client traffic through it, and the jobs beat runs (release tick,
reconcile, router sync) called in a loop. The outcome is the release's `on_node_loss`
setting: hold the weight (and say why) until the node serves both versions again, then go
on; or roll back at once. A node restarted empty gets traffic only once it is reloaded."""

import time

import pytest

from deployments.reconcile import cluster_reconcile
from releases import routing
from releases.services import release_create
from releases.tick import release_tick
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_with_baseline,
    _unload,
    release_world,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db]

SLA = {"p99_latency_ms": 500, "min_success_rate": 99.0}


@pytest.fixture(scope="module")
def triton_cluster(tmp_path_factory):
    """Two nodes of this module's own (release_world's nodes): one is killed and restarted."""
    from integrations.triton.local import start_cluster

    cluster = start_cluster(2, tmp_path_factory.mktemp("node-loss"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def fleet(release_world, triton_cluster, settings):  # noqa: F811
    settings.SWITCHYARD_ROUTER_DOWN_GRACE_S = 2.0
    return release_world | {"fleet": triton_cluster}


class Beat:
    """What beat queues, in-process: the release's tick, then reconcile and router sync."""

    def __init__(self, world, release):
        self.world, self.release, self.seen = world, release, []

    def once(self):
        self.release = release_tick(release_id=self.release.pk, inline_loads=True) or self.release
        cluster_reconcile(cluster=self.world["cluster"])
        routing.router_sync(self.world["cluster"])
        self.release.refresh_from_db()
        self.seen.append((self.release.phase, self.release.reason))
        return self.release

    def until(self, done, timeout_s: float = 60.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if done(self.once()):
                return self.release
            time.sleep(0.3)
        raise AssertionError(f"{self.release.phase}: {self.release.reason}; {self.seen[-5:]}")


def _start(world, name: str, **analysis):
    model, baseline, candidate = _model_with_baseline(world, name, 2, SLA)
    release = release_create(
        cluster=world["cluster"],
        candidate=candidate,
        actor=world["rita"],
        steps=[20, 100],
        step_interval_s=2,
        analysis={"min_requests": 10, "latency_tolerance": 5, **analysis},
        drain_s=0.5,
        progress_deadline_s=90,
    )
    return model, release


def test_a_node_killed_at_20_percent_holds_the_release_until_it_is_back_and_reloaded(fleet):
    world, nodes = fleet, fleet["fleet"]
    two = nodes.nodes[1]
    model, release = _start(world, "loss_hold")
    with Traffic(world["port"], "loss_hold") as traffic:
        beat = Beat(world, release)
        beat.until(lambda r: r.phase == "PROGRESSING" and r.router_weight == 20.0)
        nodes.kill(two)
        held = beat.until(lambda r: r.reason.startswith("holding at 20%"))
        assert two.name in held.reason and held.candidate_weight == 20.0
        time.sleep(3)  # longer than the step interval: a held release does not advance
        assert beat.once().phase == "PROGRESSING" and beat.release.step_index == 0
        nodes.restart(two)  # same ports, empty: explicit model control
        failed_before = traffic.failed
        done = beat.until(lambda r: r.phase in {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        failed_after_restart = traffic.failed - failed_before
    assert done.phase == "SUCCEEDED", beat.seen[-8:]
    messages = list(done.events.values_list("message", flat=True))
    assert sum(m.startswith("holding at 20%") for m in messages) == 1  # said once, not per tick
    assert any("resuming at 20%" in m for m in messages)
    assert failed_after_restart == 0, traffic.errors[-3:]  # the empty node got no traffic
    assert traffic.failed <= 5, traffic.errors[:5]  # at most what was in flight at the kill
    assert _loaded(world, "loss_hold") == [{"2"}, {"2"}]  # the restarted node was rehydrated
    _unload(world, model)


def test_a_node_killed_at_20_percent_rolls_the_release_back_when_so_configured(fleet):
    world, nodes = fleet, fleet["fleet"]
    two = nodes.nodes[1]
    model, release = _start(world, "loss_back", on_node_loss="rollback")
    try:
        with Traffic(world["port"], "loss_back"):
            beat = Beat(world, release)
            beat.until(lambda r: r.phase == "PROGRESSING" and r.router_weight == 20.0)
            nodes.kill(two)
            rolling = beat.until(lambda r: r.phase != "PROGRESSING")
            assert rolling.phase == "ROLLING_BACK", beat.seen[-5:]
            assert f"{two.name} not serving the candidate at 20%" in rolling.reason
            assert "on_node_loss: rollback" in rolling.reason
            nodes.restart(two)
            done = beat.until(lambda r: r.phase in {"ROLLED_BACK", "FAILED"})
        assert done.phase == "ROLLED_BACK", beat.seen[-5:]
        assert _loaded(world, "loss_back") == [{"1"}, {"1"}]
    finally:
        if two.process is None:
            nodes.restart(two)
    _unload(world, model)
