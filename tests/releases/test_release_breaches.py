"""Error gates sized by the SLA (issue #19): candidates that fail 2, 5 and 20 times what a
99 % success SLA allows (1 % of requests), at 5 % of the traffic, are each rolled back by
the fast guard, through real Triton nodes and a real nginx router with client traffic.

The analysis interval is longer than the test, so only the guard (every tick, on all the
candidate's requests so far) can roll them back: no interval is ever judged.
"""

import pytest
from django.core.cache import cache

from releases import guard_log
from releases.services import release_create
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_with_baseline,
    _tick_until,
    _unload,
    release_world,  # noqa: F401 - fixture
    ticking,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

SLA = {"p99_latency_ms": 1000, "min_success_rate": 99.0}


@pytest.mark.parametrize("times", [2, 5, 20])
def test_a_candidate_failing_n_times_the_allowance_is_rolled_back_by_the_guard(
    release_world,  # noqa: F811
    ticking,  # noqa: F811
    times: int,
):
    world = release_world
    name = f"breach_{times}x"
    model, baseline, candidate = _model_with_baseline(
        world, name, 5, SLA, failure_rate=times * 0.01
    )
    with Traffic(world["port"], name, clients=6, pause_s=0.0) as traffic:
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[5, 50, 100],
            step_interval_s=600,
            progress_deadline_s=900,
            drain_s=0.5,
        )
        release = _tick_until(
            ticking, release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"}, timeout_s=240
        )
    assert release.phase == "ROLLED_BACK", release.reason
    why = release.events.filter(kind="phase", message__contains="ROLLING_BACK").first().message
    assert "fast guard:" in why and "1% allowed (SLA 99% success)" in why, why
    assert not release.events.filter(kind="analysis").exists()  # no interval was judged
    trip = release.guard_samples[-1]
    assert guard_log.guard_samples_of(release)[-1] == trip  # from its row: the cache's is gone
    assert cache.get(guard_log._key(release.pk)) is None
    assert trip["tripped"] and trip["errors"] >= 2 and trip["lower_pct"] > 1.0
    # The candidate only ever had its 5 %: the baseline answered nearly everything.
    assert traffic.versions.get("1", 0) > 10 * traffic.versions.get(str(candidate.version), 0)
    assert _loaded(world, name) == [{"1"}, {"1"}]
    print(f"{times}x: tripped after {trip['requests']} requests, {trip['errors']} errors")
    _unload(world, model)
