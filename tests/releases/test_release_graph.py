"""Graph releases end to end: a step of an ensemble released under the ensemble's traffic, on
real Triton nodes behind a real nginx router, clients calling both the step and the
ensemble. The candidate serves under its sibling name, the ensemble's sibling (calling the
candidate's) takes the step's share of the ensemble's requests, and each interval judges
the ensemble on its own SLA too (releases/graph.py `graph_callers`). Ticks run on the
session's lane workers (tests/ticking.py)."""

import io
import json

import pytest

from accounts.errors import Refused
from deployments.services import deployment_create
from deployments.temporary import sibling_name
from integrations.routers.access_log import parse_line
from models_registry.models import Model
from models_registry.services import model_create, model_version_register
from releases import routing
from releases.services import ReleaseError, release_create
from tests.deploying import pushed
from tests.deployments.test_ensembles import _ensemble_config
from tests.registry.archives import register_risk_score_as, tar_gz
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


def _pipeline_archive(name: str, step: str, note: str = "", pin: int = -1) -> bytes:
    """An ensemble `name` of one step, `step` at its newest version (or `pin`), as an
    archive."""
    config = _ensemble_config(pin, name=name, step=step, note=note)
    return tar_gz([("config.pbtxt", config), ("1", "dir", None)])


def _pipeline_serving(world, name: str, step: str, pin: int = -1):
    """An ensemble `name` of one step, `step` at its newest version (or `pin`), deployed
    and serving."""
    model = model_create(name=name, team="fraud", actor=world["ada"], sla=SLA)
    archive = io.BytesIO(_pipeline_archive(name, step, pin=pin))
    version = model_version_register(model=model, archive=archive, actor=world["ada"])
    pushed(deployment_create(cluster=world["cluster"], version=version, actor=world["rita"]))
    return model


def _release(world, candidate):
    return release_create(
        cluster=world["cluster"],
        candidate=candidate,
        actor=world["rita"],
        steps=[30, 100],
        step_interval_s=2,
        analysis={"min_requests": 10, "max_failed_checks": 1, "latency_tolerance": 5},
        drain_s=0.5,
        progress_deadline_s=90,
    )


def _arms(world, model: str) -> dict[str, int]:
    """How many of `model`'s routed requests the router logged per arm."""
    path = routing.access_log_path(world["cluster"])
    out: dict[str, int] = {}
    for line in path.read_text().splitlines():
        entry = parse_line(line)
        if entry is not None and entry.model == model:
            arm = json.loads(line).get("arm", "")
            out[arm] = out.get(arm, 0) + 1
    return out


def _messages(release) -> list:
    return list(release.events.order_by("id").values_list("kind", "message"))[-25:]


def test_a_step_that_breaks_its_pipeline_is_rolled_back_while_its_own_traffic_is_healthy(
    release_world, ticking, client
):
    world = release_world
    step, _ = _model_serving(world, "graph_step", SLA, 1)
    pipeline = _pipeline_serving(world, "graph_pipe", "graph_step")
    # v5 failing every request with a feature above 6: the pipeline's clients send unscaled
    # features (x10), the step's own clients features within range.
    candidate = register_risk_score_as(step, world["ada"], 5, fail_above=6.0)
    direct = Traffic(world["port"], "graph_step")
    through = Traffic(world["port"], "graph_pipe", input_name="TXN", scale=10.0)
    with direct, through:
        direct.more(20)
        through.more(20)
        release = _release(world, candidate)
        assert [c["model"] for c in release.callers] == ["graph_pipe"]
        assert release.candidate_name == sibling_name("graph_step", candidate.version)
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        through.more(20)  # the pipeline answers on, through the baseline
    assert release.phase == "ROLLED_BACK", (release.reason, _messages(release))
    failed = release.events.filter(kind="analysis", message__startswith="fail").first()
    assert failed is not None, _messages(release)
    caller = failed.data["callers"]["graph_pipe"]
    assert caller["check"]["passed"] is False and caller["candidate"]["errors"] > 0, caller
    assert caller["baseline"]["errors"] == 0, caller
    assert "caller graph_pipe fails" in failed.message
    # The step's own clients were served by the candidate too, and none failed.
    assert direct.failed == 0 and direct.versions.get("2", 0) > 0, direct.summary()
    assert through.failed > 0, through.summary()  # what the candidate's arm answered
    assert_retries_within(direct, release)
    arms = _arms(world, "graph_pipe")
    assert arms.get("2", 0) > 0 and arms.get("1", 0) > 0, arms
    # The cockpit shows the caller, its arms and the check that failed.
    client.force_login(world["rita"])
    page = client.get(f"/releases/{release.pk}/").content.decode()
    panel = page.split('data-testid="graph-callers"')[1].split("</table>")[0]
    assert "graph_pipe</a> v1" in panel and "caller graph_pipe fails" in panel, panel
    # Rolled back: the step serves v1 alone, no sibling is left, the pipeline answers.
    assert _loaded(world, "graph_step") == [{"1"}, {"1"}]
    for name in (release.candidate_name, release.callers[0]["served_as"]):
        assert _loaded(world, name) == [set(), set()], name
    _unload(world, pipeline)
    _unload(world, step)


def test_a_healthy_step_is_promoted_under_its_pipelines_traffic(release_world, ticking):
    world = release_world
    step, _ = _model_serving(world, "graph_ok", SLA, 1)
    pipeline = _pipeline_serving(world, "graph_ok_pipe", "graph_ok")
    candidate = register_risk_score_as(step, world["ada"], 2)
    direct = Traffic(world["port"], "graph_ok")
    through = Traffic(world["port"], "graph_ok_pipe", input_name="TXN", scale=10.0)
    with direct, through:
        direct.more(20)
        through.more(20)
        release = _release(world, candidate)
        # The pipeline's own release waits: its path is split by the step's.
        again = model_version_register(
            model=pipeline, archive=io.BytesIO(_pipeline_archive(pipeline.name, "graph_ok", "v2")),
            actor=world["ada"],
        )  # fmt: skip
        with pytest.raises(ReleaseError, match="splits graph_ok_pipe's traffic too") as refused:
            _release(world, again)
        assert refused.value.status == 409
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        through.more(20)  # the pipeline answers through the promoted step
    assert release.phase == "SUCCEEDED", (release.reason, _messages(release))
    judged = release.events.filter(kind="analysis", message__startswith="pass")
    assert any("graph_ok_pipe" in (e.data.get("callers") or {}) for e in judged)
    assert direct.failed == 0 and through.failed == 0, (direct.summary(), through.summary())
    assert_retries_within(direct, release)
    assert_retries_within(through, release)
    assert _arms(world, "graph_ok_pipe").get("2", 0) > 0
    assert _loaded(world, "graph_ok") == [{"2"}, {"2"}]
    for name in (release.candidate_name, release.callers[0]["served_as"]):
        assert _loaded(world, name) == [set(), set()], name
    _unload(world, pipeline)
    _unload(world, step)


def _pinned_pipeline(world, name: str, step: str, pin: int, note: str):
    """A new version of the pipeline `name` pinning `step` v`pin`."""
    pipeline = Model.objects.get(name=name)
    archive = io.BytesIO(_pipeline_archive(name, step, note, pin=pin))
    return model_version_register(model=pipeline, archive=archive, actor=world["ada"])


def test_a_pipeline_pinning_a_new_step_version_loads_it_first_and_is_promoted(
    release_world, ticking
):
    """The pipeline's v1 pins the step's v1; its v2 pins v2, which the cluster does not
    serve: the release loads step v2 under its sibling name for the candidate, and at
    promotion beside v1 under the step's own name before the pipeline's v2 loads."""
    world = release_world
    step, _ = _model_serving(world, "gp_step", SLA, 1)
    model = _pipeline_serving(world, "gp_pipe", "gp_step", pin=1)
    register_risk_score_as(step, world["ada"], 2)
    candidate = _pinned_pipeline(world, "gp_pipe", "gp_step", 2, "v2 pins v2")
    through = Traffic(world["port"], "gp_pipe", input_name="TXN", scale=10.0)
    with through:
        through.more(20)
        release = _release(world, candidate)
        assert release.step_loads == [
            {"model": "gp_step", "version": 2, "served_as": sibling_name("gp_step", 2)}
        ]
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        through.more(20)  # v2 answers through step v2
    assert release.phase == "SUCCEEDED", (release.reason, _messages(release))
    assert through.failed == 0, through.summary()
    assert set(through.versions) == {"1", "2"}, through.summary()
    assert_retries_within(through, release)
    assert _loaded(world, "gp_pipe") == [{"2"}, {"2"}]
    assert _loaded(world, "gp_step") == [{"1", "2"}, {"1", "2"}]  # v2 added beside v1
    for name in (release.candidate_name, sibling_name("gp_step", 2)):
        assert _loaded(world, name) == [set(), set()], name
    _unload(world, model)
    _unload(world, step)


def test_a_pipeline_pinning_a_step_version_that_breaks_it_is_rolled_back(release_world, ticking):
    world = release_world
    step, _ = _model_serving(world, "gp_bad_step", SLA, 1)
    model = _pipeline_serving(world, "gp_bad", "gp_bad_step", pin=1)
    register_risk_score_as(step, world["ada"], 5, fail_above=6.0)  # v2
    candidate = _pinned_pipeline(world, "gp_bad", "gp_bad_step", 2, "v2 pins a bad v2")
    through = Traffic(world["port"], "gp_bad", input_name="TXN", scale=10.0)
    with through:
        through.more(20)
        release = _release(world, candidate)
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        through.more(20)  # v1 alone again
    assert release.phase == "ROLLED_BACK", (release.reason, _messages(release))
    assert through.failed > 0 and through.versions.get("1", 0) > 0, through.summary()
    # Nothing of the candidate is left: the step serves v1 alone, no sibling stays.
    assert _loaded(world, "gp_bad_step") == [{"1"}, {"1"}]
    for name in (release.candidate_name, sibling_name("gp_bad_step", 2)):
        assert _loaded(world, name) == [set(), set()], name
    _unload(world, model)
    _unload(world, step)


def test_a_pipeline_version_calling_a_step_version_not_registered_is_refused(release_world):
    """A pinned step version the release cannot bring (not registered) is a 409 naming it,
    before anything loads."""
    world = release_world
    step, _ = _model_serving(world, "graph_pin", SLA, 1)
    pipeline = _pipeline_serving(world, "graph_pin_pipe", "graph_pin")
    register_risk_score_as(step, world["ada"], 2)
    step.versions.filter(version=2).delete()  # v2 is gone: the pin names nothing
    pinned = model_version_register(
        model=pipeline, archive=io.BytesIO(_pipeline_archive(pipeline.name, "graph_pin", pin=2)),
        actor=world["ada"],
    )  # fmt: skip
    with pytest.raises(Refused, match=r"calls graph_pin v2 \(not registered\)") as refused:
        _release(world, pinned)
    assert refused.value.status == 409
    assert not pipeline.releases.exists()
    _unload(world, pipeline)
    _unload(world, step)
