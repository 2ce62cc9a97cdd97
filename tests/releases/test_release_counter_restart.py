"""A Triton node restarted in the middle of a release: the release's analysis counts that
node only from readings taken on both sides of an interval in the same server lifetime (the
restart rule of integrations.triton.metrics.counter_deltas), never from zero.

The nodes are this module's own (the restart is a fault injected here, never on the shared
session nodes): `triton_cluster` is overridden below, and `release_world` builds on it."""

import time

import pytest

from deployments.reconcile import cluster_reconcile
from integrations.triton.local import start_cluster
from releases import observe
from releases.models import Release
from releases.routing import access_log_path
from releases.services import release_create
from tests.conftest import session_node_key, wait_for
from tests.releases.test_release_flow import (
    Traffic,
    _model_with_baseline,
    _tick_until,
    release_world,  # noqa: F401 - fixture
    ticking,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def triton_cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("restart")
    cluster = start_cluster(2, work, metrics_interval_ms=1000, node_key=session_node_key())
    try:
        yield cluster
    finally:
        cluster.stop()


def _requests(reading: dict) -> float:
    return reading["success"] + reading["failure"]


def _wait_for_series(node, model: str, version: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = observe.node_view(node, model, 2)
        if view.live and version in view.counters:
            return
        time.sleep(0.2)
    raise AssertionError(f"{node.name} never served {model} v{version} again")


def _wait_for_requests(node, model: str, version: str, *, more_than: float) -> None:
    """Wait until the node's counters for `version` count more than `more_than` requests."""

    def grown() -> bool:
        view = observe.node_view(node, model, 2)
        return (
            view.live
            and version in view.counters
            and (_requests(view.counters[version]) > more_than)
        )

    wait_for(grown, timeout_s=60, what=f"{node.name} to count {more_than} requests of {model}")


def _progressing_interval(loop, release: Release) -> Release:
    """The release once the first step's interval has started and carries baseline traffic."""

    def started_with_traffic(release: Release) -> bool:
        start = (release.interval or {}).get("start") or {}
        readings = [v.get("1") for v in start.get("nodes", {}).values()]
        weight = release.candidate_weight
        routed = weight > 0 and release.router_weight == weight
        return routed and len(readings) == 2 and all(r and _requests(r) > 0 for r in readings)

    release = _tick_until(loop, release, {"PROGRESSING"})
    return loop.until(
        release.pk, started_with_traffic, "an interval with traffic on both nodes", 60
    )


def test_a_node_restarted_mid_release_feeds_the_gates_no_made_up_interval(
    release_world,  # noqa: F811
    ticking,  # noqa: F811
    triton_cluster,
):
    world = release_world
    cluster = world["cluster"]
    victim = cluster.nodes.get(name=triton_cluster.nodes[1].name)
    model, _, candidate = _model_with_baseline(
        world, "rel_restart", 2, {"p99_latency_ms": 2000, "min_success_rate": 50.0}
    )
    with Traffic(world["port"], "rel_restart") as traffic:
        traffic.more(20)
        release = release_create(
            cluster=cluster,
            candidate=candidate,
            actor=world["rita"],
            steps=[50, 100],
            step_interval_s=600,  # no verdict while the test looks at the interval
            analysis={"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5},
            drain_s=0.5,
            progress_deadline_s=1200,
        )
        release = _progressing_interval(ticking, release)
        before = release.interval["start"]
        old = before["nodes"][victim.name]["1"]
        # The victim's counters grow well past its start reading.
        _wait_for_requests(victim, "rel_restart", "1", more_than=_requests(old) + 50)

        # No tick while the victim restarts and reconcile reloads it (with its warm-up): the
        # first tick after sees it serve again, in its new lifetime.
        ticking.pause()
        triton_cluster.kill(triton_cluster.nodes[1])
        triton_cluster.restart(triton_cluster.nodes[1])  # same ports, comes back empty
        cluster_reconcile(cluster=cluster)  # loads what the cluster must serve again
        _wait_for_series(victim, "rel_restart", "1")
        ticking.resume()
        ticking.more_ticks(2)
        release = Release.objects.get(pk=release.pk)
        start = release.interval["start"]
        # The interval goes on (same start time); only the victim starts from its new
        # reading, from the server's new lifetime; the other node keeps its start.
        assert start["at"] == before["at"] and start["log_offset"] == before["log_offset"]
        renewed = start["nodes"][victim.name]["1"]
        assert _requests(renewed) < _requests(old), (renewed, old)
        others = [n for n in start["nodes"] if n != victim.name]
        assert all(start["nodes"][n] == before["nodes"][n] for n in others)

        # Traffic on the victim again, past its new start reading.
        renewed_n = _requests(renewed)
        _wait_for_requests(victim, "rel_restart", "1", more_than=renewed_n + 20)
        views = observe.nodes_view(cluster, "rel_restart", 2)
        metrics = observe.interval_metrics(release, views, release.interval)

    expected = sum(
        _requests(view.counters["1"]) - _requests(start["nodes"][name]["1"])
        for name, view in views.items()
        if view.live and "1" in view.counters
    )
    baseline = metrics["baseline"]
    assert baseline.requests == int(expected) and baseline.requests > 0
    # What the router logged since the interval started is every request that was really
    # sent: Triton's counts for the interval can never exceed it.
    assert access_log_path(cluster) is not None and baseline.router_requests is not None
    assert baseline.requests <= baseline.router_requests, (baseline, metrics["candidate"])
    assert metrics["candidate"].requests <= (metrics["candidate"].router_requests or 0)
    assert model.name == "rel_restart"
