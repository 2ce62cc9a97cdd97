"""A Triton node killed while a release holds 20 % of the traffic, then restarted empty: real
nodes, a real nginx router, client traffic through it, and the jobs beat runs: release ticks
on lane workers of the test's own, queued as beat does (tests/ticking.py), and reconcile and
router sync called in a loop. The outcome is the release's `on_node_loss` setting: hold the
weight (and say why) until the node serves both versions again, then go on; or roll back at
once. A node restarted empty gets traffic only once it is reloaded."""

import time

import pytest

from deployments.reconcile import cluster_reconcile
from releases import routing
from releases.models import Release
from releases.services import release_create
from tests.conftest import drop_queues, session_node_key
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_with_baseline,
    _unload,
    release_world,  # noqa: F401 - fixture
    router_reloads,
)
from tests.ticking import Lanes, Ticking

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

SLA = {"p99_latency_ms": 500, "min_success_rate": 99.0}


@pytest.fixture(scope="module")
def triton_cluster(tmp_path_factory):
    """Two nodes of this module's own (release_world's nodes): one is killed and restarted."""
    from integrations.triton.local import start_cluster

    cluster = start_cluster(2, tmp_path_factory.mktemp("node-loss"), node_key=session_node_key())
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def fleet(release_world, triton_cluster, settings, tmp_path):  # noqa: F811
    """release_world on this module's nodes, with lane workers of its own that know the
    router's short grace for a node that stops answering."""
    settings.SWITCHYARD_ROUTER_DOWN_GRACE_S = 2.0
    env = {"SWITCHYARD_ROUTER_DOWN_GRACE_S": "2.0", "SWITCHYARD_DEPLOY_DRAIN_S": "0.2"}
    lanes = Lanes(tmp_path, env=env)
    try:
        with lanes:
            yield release_world | {"fleet": triton_cluster, "lanes": lanes}
    finally:
        drop_queues(lanes.base)


class Beat:
    """What beat runs: the release's ticks on the lane workers, and here, in between looks at
    the release, reconcile and router sync."""

    def __init__(self, world, release, loop: Ticking):
        self.world, self.release, self.loop, self.seen = world, release, loop, []
        self.syncs = 0  # router syncs that changed (reloaded) the router

    def once(self):
        cluster_reconcile(cluster=self.world["cluster"])
        self.syncs += bool(routing.router_sync(self.world["cluster"]))
        self.release = Release.objects.get(pk=self.release.pk)
        self.seen.append((self.release.phase, self.release.reason))
        return self.release

    def until(self, done, timeout_s: float = 90.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.loop.lanes.alive()
            if done(self.once()):
                return self.release
            time.sleep(0.3)
        raise AssertionError(
            f"{self.release.phase}: {self.release.reason}; {self.seen[-5:]}; "
            f"{self.loop.ticks()} ticks"
        )


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
    with Traffic(world["port"], "loss_hold") as traffic, Ticking(world["lanes"]) as loop:
        beat = Beat(world, release, loop)
        beat.until(lambda r: r.phase == "PROGRESSING" and r.router_weight == 20.0)
        nodes.kill(two)
        held = beat.until(lambda r: r.reason.startswith("holding at 20%"))
        assert two.name in held.reason and held.candidate_weight == 20.0
        time.sleep(3)  # longer than the step interval: a held release does not advance,
        loop.more_ticks(3)  # and ticks ran meanwhile
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
    assert traffic.failed <= 5, traffic.summary()  # at most what was in flight at the kill
    reloads = router_reloads(done) + beat.syncs
    assert traffic.retries <= traffic.retries_allowed(reloads), (reloads, traffic.summary())
    assert _loaded(world, "loss_hold") == [{"2"}, {"2"}]  # the restarted node was rehydrated
    _unload(world, model)


def test_a_node_killed_at_20_percent_rolls_the_release_back_when_so_configured(fleet):
    world, nodes = fleet, fleet["fleet"]
    two = nodes.nodes[1]
    model, release = _start(world, "loss_back", on_node_loss="rollback")
    try:
        with Traffic(world["port"], "loss_back"), Ticking(world["lanes"]) as loop:
            beat = Beat(world, release, loop)
            beat.until(lambda r: r.phase == "PROGRESSING" and r.router_weight == 20.0)
            nodes.kill(two)
            moved = beat.until(lambda r: r.phase != "PROGRESSING")
            # The ticks run on: the release may be past ROLLING_BACK already; its event says why.
            assert moved.phase in {"ROLLING_BACK", "ROLLED_BACK"}, beat.seen[-5:]
            entered = moved.events.filter(kind="phase", message__contains="→ ROLLING_BACK:")
            rolling = entered.order_by("id").first()
            assert rolling is not None, list(moved.events.values_list("message", flat=True))
            assert f"{two.name} not serving the candidate at 20%" in rolling.message
            assert "on_node_loss: rollback" in rolling.message
            nodes.restart(two)
            done = beat.until(lambda r: r.phase in {"ROLLED_BACK", "FAILED"})
        assert done.phase == "ROLLED_BACK", beat.seen[-5:]
        assert _loaded(world, "loss_back") == [{"1"}, {"1"}]
    finally:
        if two.process is None:
            nodes.restart(two)
    _unload(world, model)
