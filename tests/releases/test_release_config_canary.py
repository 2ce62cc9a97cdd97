"""Config canaries end to end: a candidate whose config differs from the baseline's serves
beside it under its sibling name (`<model>--c<version>`) on the same real Triton nodes, the
real nginx router sends the candidate's share of the model's path there, clients keep
calling the model's name. Ticks run on the session's lane workers (tests/ticking.py)."""

import pytest

from deployments.temporary import sibling_name
from models_registry.services import model_version_derive
from releases.services import release_create
from tests.nodes import keyed_client
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_serving,
    _unload,
    assert_retries_within,
)
from tests.releases.test_release_flow import release_world as release_world  # noqa: F401
from tests.releases.test_release_flow import ticking as ticking  # noqa: F401

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

SLA = {"p99_latency_ms": 500, "min_success_rate": 99.0}


def _derived_with_batching_delay(baseline, user, delay_us: int):
    """A config-only version: the baseline's files, its config but for the dynamic batching
    delay (the registry's derive, as `POST .../versions/{v}/derive/` with a config patch)."""
    patch = {"dynamic_batching": {"max_queue_delay_microseconds": delay_us}}
    return model_version_derive(source=baseline, actor=user, config_patch=patch)


def _delays(world, name: str) -> list[str | None]:
    """Each node's served `dynamic_batching.max_queue_delay_microseconds` of `name`."""
    out = []
    for node in world["nodes"]:
        with keyed_client(node) as client:
            config = client.model_config(name)
        out.append(str((config.get("dynamic_batching") or {}).get("max_queue_delay_microseconds")))
    return out


def _messages(release) -> list[str]:
    return list(release.events.order_by("id").values_list("kind", "message"))[-25:]


def _release(world, candidate, steps):
    return release_create(
        cluster=world["cluster"],
        candidate=candidate,
        actor=world["rita"],
        steps=steps,
        step_interval_s=2,
        analysis={"min_requests": 10, "max_failed_checks": 1, "latency_tolerance": 5},
        drain_s=0.5,
        progress_deadline_s=90,
    )


def test_a_batching_only_change_is_promoted_with_both_configs_served_at_once(
    release_world, ticking
):
    world = release_world
    model, baseline = _model_serving(world, "cfg_good", SLA, 1)
    candidate = _derived_with_batching_delay(baseline, world["ada"], 100)
    assert candidate.derived_from_id == baseline.pk  # the same files, a new config
    sibling = sibling_name("cfg_good", candidate.version)
    with Traffic(world["port"], "cfg_good") as traffic:
        traffic.more(20)
        release = _release(world, candidate, [30, 100])
        assert release.candidate_name == sibling
        seen = ticking.until(
            release.pk, lambda r: r.phase == "PROGRESSING" and (r.router_weight or 0) > 0,
            "the candidate's first step routed",
        )  # fmt: skip
        # Both configs served at once: the baseline's under the model's name, the candidate's
        # under its sibling name, on every node.
        assert _delays(world, "cfg_good") == ["500", "500"]
        assert _delays(world, sibling) == ["100", "100"]
        assert _loaded(world, "cfg_good") == [{"1"}, {"1"}]
        assert _loaded(world, sibling) == [{"2"}, {"2"}]
        release = ticking.phase(seen.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        traffic.more(50)  # the promoted version answers on under the model's name
    assert release.phase == "SUCCEEDED", (release.reason, _messages(release))
    assert traffic.failed == 0, traffic.summary()
    assert set(traffic.versions) == {"1", "2"}, traffic.summary()
    assert_retries_within(traffic, release)
    # Promotion made the candidate's config the model's, and the sibling is gone.
    assert _loaded(world, "cfg_good") == [{"2"}, {"2"}]
    assert _delays(world, "cfg_good") == ["100", "100"]
    assert _loaded(world, sibling) == [set(), set()]
    messages = list(release.events.values_list("message", flat=True))
    assert f"{sibling} unloaded from every node" in messages
    _unload(world, model)


def test_a_config_that_makes_it_slower_is_rolled_back_with_the_baselines_config_untouched(
    release_world, ticking
):
    world = release_world
    model, baseline = _model_serving(world, "cfg_slow", SLA, 1)
    # 300 ms of batching delay: with few clients a batch never fills, so each request waits.
    candidate = _derived_with_batching_delay(baseline, world["ada"], 300_000)
    sibling = sibling_name("cfg_slow", candidate.version)
    with Traffic(world["port"], "cfg_slow") as traffic:
        traffic.more(20)
        release = _release(world, candidate, [30, 60, 100])
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        traffic.more(20)
    assert release.phase == "ROLLED_BACK", (release.reason, _messages(release))
    why = " ".join(release.events.filter(kind="phase").values_list("message", flat=True))
    assert "failed checks" in why and ("avg" in why or "p99" in why), why  # latency gates
    assert traffic.failed == 0, traffic.summary()  # slower, never failing
    assert traffic.versions.get("2", 0) > 0, traffic.summary()  # the candidate was tried
    assert_retries_within(traffic, release)
    assert _loaded(world, "cfg_slow") == [{"1"}, {"1"}]
    assert _delays(world, "cfg_slow") == ["500", "500"]  # never reloaded under v2's config
    assert _loaded(world, sibling) == [set(), set()]
    _unload(world, model)
