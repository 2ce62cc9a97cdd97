"""A release whose candidate would not fit beside its baseline is refused at its start with
the numbers (real Triton nodes, the real collector's readings of their memory gauges, no
node called by the start itself); one that fits starts."""

import asyncio

import pytest
from django.db import connection

from releases.services import ReleaseError, release_create
from telemetry.runner import CollectorRunner
from tests.conftest import in_thread
from tests.registry.archives import register_risk_score_as
from tests.releases.test_release_flow import (
    _model_serving,
    release_world,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

SLA = {"p99_latency_ms": 500, "min_success_rate": 99.0}


def _collect(ticks: int = 2) -> None:
    """The collector as `run_collector` runs it, for a few ticks: its node points (Triton's
    memory gauges among them) go to the live pages' recent buffer."""

    async def run() -> None:
        await CollectorRunner(interval_s=1.0).run(asyncio.Event(), ticks=ticks)

    try:
        asyncio.run(run())
    finally:
        connection.close()


def test_a_candidate_that_would_leave_a_node_short_is_refused_with_the_figures(
    release_world,  # noqa: F811
    settings,
):
    world = release_world
    model, baseline = _model_serving(world, "rel_memory", SLA)
    candidate = register_risk_score_as(model, world["ada"], 2)
    in_thread(_collect)  # its own thread: its event loop, its database connection
    settings.SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES = 2**50  # a PiB kept free: no node has it
    with pytest.raises(ReleaseError) as refused:
        release_create(cluster=world["cluster"], candidate=candidate, actor=world["rita"],
                       dry_run=True)  # fmt: skip
    message = refused.value.message
    assert refused.value.status == 409, message
    assert message.startswith(f"v2 does not fit beside v1 on {world['cluster'].name}: ")
    for node in world["nodes"]:  # every node is named with its figures
        assert f"{node.name}: not enough memory: " in message
    assert "GiB free" in message and "stays free (SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES)" in message
    settings.SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES = 256 * 2**20
    checked = release_create(cluster=world["cluster"], candidate=candidate, actor=world["rita"],
                             dry_run=True)  # fmt: skip
    assert checked.candidate_id == candidate.pk and checked.pk is None  # fits: nothing written
