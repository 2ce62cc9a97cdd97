"""No false rollbacks (issue #19): A/A releases, the candidate's files identical to the
baseline's, through real Triton nodes and a real nginx router with client traffic, are all
promoted; at a traffic too low to judge, the release ends by the configured rule (here:
paused after max_inconclusive_checks, saying why) instead of running on. bench/
guard_breaches.py runs twenty of them."""

import pytest

from releases.services import release_action, release_create
from tests.registry.archives import register_risk_score_as
from tests.releases.test_release_flow import (
    Traffic,
    _model_serving,
    _tick_until,
    _unload,
    assert_retries_within,
    release_world,  # noqa: F401 - fixture
    ticking,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

SLA = {"p99_latency_ms": 1000, "min_success_rate": 99.0}
ENDED = {"SUCCEEDED", "ROLLED_BACK", "FAILED", "PAUSED"}


def test_identical_candidates_are_promoted_and_a_thin_one_pauses_by_its_rule(
    release_world,  # noqa: F811
    ticking,  # noqa: F811
):
    world = release_world
    model, _ = _model_serving(world, "aa", SLA, 2)
    outcomes, released = [], []
    with Traffic(world["port"], "aa", clients=4) as traffic:
        for _ in range(2):
            candidate = register_risk_score_as(model, world["ada"], 2)  # the same files
            release = release_create(
                cluster=world["cluster"],
                candidate=candidate,
                actor=world["rita"],
                steps=[5, 50, 100],
                step_interval_s=3,
                analysis={"min_requests": 20},
                drain_s=0.5,
                progress_deadline_s=120,
            )
            release = _tick_until(ticking, release, ENDED, timeout_s=120)
            released.append(release)
            why = release.events.filter(kind__in=["phase", "analysis"]).order_by("created_at")
            outcomes.append((release.phase, [e.message for e in why][-4:]))
    assert [phase for phase, _ in outcomes] == ["SUCCEEDED"] * 2, outcomes
    assert traffic.failed == 0, traffic.summary()
    assert_retries_within(traffic, *released)

    # At 5 % of ~3 req/s, no interval has min_requests (50 by default): the release pauses.
    candidate = register_risk_score_as(model, world["ada"], 2)
    with Traffic(world["port"], "aa", clients=1, pause_s=0.3):
        release = release_create(
            cluster=world["cluster"],
            candidate=candidate,
            actor=world["rita"],
            steps=[5, 50, 100],
            step_interval_s=2,
            analysis={"max_inconclusive_checks": 2},
            drain_s=0.5,
            progress_deadline_s=120,
        )
        release = _tick_until(ticking, release, ENDED, timeout_s=60)
    assert release.phase == "PAUSED", release.reason
    assert "inconclusive" in release.reason, release.reason
    assert not release.events.filter(kind="analysis", message__startswith="fail").exists()
    release_action(release=release, action="rollback", actor=world["rita"], reason="thin")
    assert _tick_until(ticking, release, {"ROLLED_BACK", "FAILED"}).phase == "ROLLED_BACK"
    _unload(world, model)
