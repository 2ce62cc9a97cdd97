"""Config canaries and shadows end to end, on the same real Triton nodes behind a real nginx
router with clients calling the model's name. A candidate whose config differs from the
baseline's serves beside it under its sibling name (`<model>--c<version>`) and the router
sends the candidate's share there; a shadow mirrors requests to the candidate before any
client gets it. Ticks run on the session's lane workers (tests/ticking.py)."""

import pytest

from deployments.reconcile import cluster_reconcile
from deployments.temporary import sibling_name
from integrations.routers.access_log import parse_line
from models_registry.services import model_version_derive
from releases import routing
from releases.services import release_create
from tests.conftest import wait_for
from tests.nodes import keyed_client
from tests.registry.archives import register_risk_score_as
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


# ---------------------------------------------------------------- shadows


def _copies(world) -> list:
    """The router's logged copies of requests (a shadow's), oldest first."""
    path = routing.access_log_path(world["cluster"])
    entries = [parse_line(line) for line in path.read_text().splitlines()]
    return [e for e in entries if e is not None and e.mirror]


def test_a_shadow_catches_a_faulty_candidate_before_any_client_gets_it(release_world, ticking):
    world = release_world
    model, baseline = _model_serving(world, "shadow_bad", SLA, 1)
    candidate = register_risk_score_as(model, world["ada"], 3)  # fails a share of requests
    with Traffic(world["port"], "shadow_bad") as traffic:
        traffic.more(20)
        release = release_create(
            cluster=world["cluster"], candidate=candidate, actor=world["rita"],
            steps=[25, 100], step_interval_s=2, shadow_s=30, shadow_share=100,
            analysis={"min_requests": 10, "max_failed_checks": 1}, drain_s=0.5,
            progress_deadline_s=90,
        )  # fmt: skip
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        traffic.more(20)
    assert release.phase == "ROLLED_BACK", (release.reason, _messages(release))
    phases = list(release.events.filter(kind="phase").values_list("message", flat=True))
    assert any(m.startswith("LOADING → SHADOWING") for m in phases), phases
    assert any(m.startswith("SHADOWING → ROLLING_BACK") for m in phases), phases
    assert release.candidate_weight == 0.0  # never a step
    # No client request was ever answered by the candidate, and none failed.
    assert set(traffic.versions) == {"1"} and traffic.failed == 0, traffic.summary()
    copies = _copies(world)
    assert copies and {e.version for e in copies} == {candidate.version}
    assert any(e.is_error for e in copies)  # what the candidate answered the copies
    assert _loaded(world, "shadow_bad") == [{"1"}, {"1"}]
    _unload(world, model)


def test_a_healthy_candidate_passes_its_shadow_and_then_walks_its_steps(release_world, ticking):
    world = release_world
    model, baseline = _model_serving(world, "shadow_ok", SLA, 1)
    candidate = register_risk_score_as(model, world["ada"], 2)
    with Traffic(world["port"], "shadow_ok") as traffic:
        traffic.more(20)
        release = release_create(
            cluster=world["cluster"], candidate=candidate, actor=world["rita"],
            steps=[50, 100], step_interval_s=2, shadow_s=4, shadow_share=50,
            analysis={"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5},
            drain_s=0.5, progress_deadline_s=90,
        )  # fmt: skip
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
    assert release.phase == "SUCCEEDED", (release.reason, _messages(release))
    phases = list(release.events.filter(kind="phase").values_list("message", flat=True))
    assert any(m.startswith("SHADOWING → PROGRESSING: 0% → 50%: shadow passed") for m in phases)
    effects = list(release.events.filter(kind="effect").values_list("message", flat=True))
    assert "router: 0% to v2, 50% of requests mirrored to it" in effects, effects
    assert traffic.failed == 0, traffic.summary()
    assert_retries_within(traffic, release)
    copies = _copies(world)
    assert len(copies) >= 10 and all(e.status == 200 and e.version == 2 for e in copies)
    _unload(world, model)


# ---------------------------------------------------------------- answer agreement

AGREEMENT = {"sample_share": 50, "max_per_s": 40, "min_agreement": 0.99, "min_compared": 100}


def _shadow_with_agreement(world, ticking, name: str, disagree_rate: float, shadow_s: float):
    """A release of variant 5 (v2's scores; `disagree_rate` of inputs moved) against v2 with
    a shadow whose answers are compared, ticked until it ends; (release, traffic)."""
    model, baseline = _model_serving(world, name, SLA, 2)
    candidate = register_risk_score_as(
        model, world["ada"], 5, failure_rate=0.0, disagree_rate=disagree_rate
    )
    with Traffic(world["port"], name) as traffic:
        traffic.more(20)
        release = release_create(
            cluster=world["cluster"], candidate=candidate, actor=world["rita"],
            steps=[50, 100], step_interval_s=2, shadow_s=shadow_s, shadow_share=100,
            agreement=AGREEMENT, drain_s=0.5, progress_deadline_s=120,
            analysis={"min_requests": 10, "max_failed_checks": 1, "latency_tolerance": 5},
        )  # fmt: skip
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"}, 150)
    return model, release, traffic


def test_the_agreement_gate_refuses_a_candidate_that_answers_5_percent_of_inputs_otherwise(
    release_world, ticking
):
    world = release_world
    model, release, traffic = _shadow_with_agreement(world, ticking, "agree_bad", 0.05, 60)
    assert release.phase == "ROLLED_BACK", (release.reason, _messages(release))
    assert "answers agree on" in release.outcome_reason, release.outcome_reason
    assert set(traffic.versions) == {"1"} and traffic.failed == 0, (
        traffic.summary()
    )  # v1: variant 2
    found = release.agreement_state
    assert found["compared"] >= 100 and found["agreed"] < found["compared"], found
    assert 0.85 < found["agreed"] / found["compared"] < 0.99, found  # 4 of the 64 inputs
    assert found["outputs"]["SCORE"][0] == found["compared"]
    assert found["examples"] and "SCORE: [0]" in found["examples"][0]["why"]
    assert found["baseline_requests"] == found["compared"]
    _unload(world, model)


def test_an_identical_candidate_passes_the_agreement_gate_and_is_promoted(
    release_world, ticking, client
):
    world = release_world
    model, release, traffic = _shadow_with_agreement(world, ticking, "agree_ok", 0.0, 8)
    assert release.phase == "SUCCEEDED", (release.reason, _messages(release))
    found = release.agreement_state
    assert found["compared"] >= 100 and found["agreed"] == found["compared"], found
    assert found["examples"] == [] and traffic.failed == 0, traffic.summary()
    # The comparer's load on the baseline stayed within its rate over the shadow.
    assert found["baseline_requests"] <= AGREEMENT["max_per_s"] * (8 + 10), found
    client.force_login(world["rita"])
    text = client.get(f"/releases/{release.pk}/").content.decode()
    assert 'data-testid="agreement"' in text
    assert f"{found['agreed']} of {found['compared']} inputs agree (100%)" in text
    _unload(world, model)


def test_a_node_restarted_mid_config_canary_gets_its_sibling_back_before_the_release_goes_on(
    release_world, ticking, triton_cluster
):
    """Reconcile loads only what the model's own name serves: the restarted node's sibling
    comes back from the release itself (its serving set applied again), and until then the
    router keeps that node out (no client request meets an "unknown model")."""
    world = release_world
    cluster = world["cluster"]
    model, baseline = _model_serving(world, "cfg_restart", SLA, 1)
    candidate = _derived_with_batching_delay(baseline, world["ada"], 100)
    sibling = sibling_name("cfg_restart", candidate.version)
    victim = triton_cluster.nodes[1]
    with Traffic(world["port"], "cfg_restart") as traffic:
        traffic.more(20)
        release = release_create(
            cluster=cluster, candidate=candidate, actor=world["rita"], steps=[50, 100],
            step_interval_s=3, drain_s=0.5, progress_deadline_s=120,
            analysis={"min_requests": 10, "max_failed_checks": 3, "latency_tolerance": 5,
                      "on_node_loss": "hold"},
        )  # fmt: skip
        ticking.until(release.pk, lambda r: r.router_weight == 50.0, "the candidate at 50%")
        ticking.pause()
        triton_cluster.kill(victim)
        triton_cluster.restart(victim)  # same ports, comes back empty
        cluster_reconcile(cluster=cluster)  # the model's own name: v1 loaded again
        assert _loaded(world, sibling) == [{"2"}, set()]
        routing.router_sync(cluster)  # beat's routers-sync (every 10 s)
        live = routing.router_for(cluster).current()
        assert victim.http_url not in live.upstreams  # out until its sibling is back
        ticking.resume()
        wait_for(lambda: _loaded(world, sibling) == [{"2"}, {"2"}], timeout_s=60,
                 what="the sibling loaded again on the restarted node")  # fmt: skip
        routing.router_sync(cluster)
        assert victim.http_url in routing.router_for(cluster).current().upstreams
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        traffic.more(20)
    assert release.phase == "SUCCEEDED", (release.reason, _messages(release))
    loads = release.events.filter(message="serving set on every node: baseline+candidate")
    assert loads.count() == 2  # the first load, and the one that brought the sibling back
    assert victim.http_url in routing.router_for(cluster).current().upstreams
    errors = [e for e in traffic.errors if "unknown model" in e or "not found" in e.lower()]
    assert not errors, traffic.summary()  # failures at the kill itself are the crash's
    _unload(world, model)
