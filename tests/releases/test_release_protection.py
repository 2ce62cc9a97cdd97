"""While a release runs, its model's SLA and production alias hold still (409), and the gates
judge against the SLA recorded when the release started. Real Triton, nginx and traffic."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from models_registry.models import Model
from models_registry.services import alias_set
from releases.models import Release
from releases.services import release_action, release_create
from tests.releases import test_release_flow as flow
from tests.releases.test_release_flow import Traffic, _model_with_baseline, _tick_until, _unload

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]
release_world = flow.release_world  # the flow tests' cluster: real Triton nodes and nginx
ticking = flow.ticking  # ticks from the session's lane workers
SLA = {"p99_latency_ms": 500.0, "min_success_rate": 99.0, "max_queue_ms": None}


def _api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _start(world, candidate) -> Release:
    return release_create(
        cluster=world["cluster"],
        candidate=candidate,
        actor=world["rita"],
        steps=[50, 100],
        step_interval_s=2,
        manual_gates=[100],
        analysis={"min_requests": 10, "max_failed_checks": 1, "latency_tolerance": 5},
        drain_s=0.5,
        progress_deadline_s=60,
    )


def _refusals_while_active(world, model, baseline, candidate, root) -> None:
    ada = _api(world["ada"])
    url = f"/api/v1/models/{model.name}"
    for who in (ada, _api(root)):
        loosen = who.patch(f"{url}/", {"sla": {"p99_latency_ms": 5000}}, format="json")
        assert loosen.status_code == 409, loosen.content
        [error] = loosen.json()["errors"]
        assert error["field"] == "sla" and "cannot change until it ends" in error["message"]
        move = who.put(f"{url}/aliases/production/", {"version": candidate.version}, format="json")
        assert move.status_code == 409, move.content
    # What the release does not hold stays writable: same SLA, description, other aliases.
    same = ada.patch(f"{url}/", {"sla": {"p99_latency_ms": 500}, "description": "x"}, format="json")
    assert same.status_code == 200, same.content
    other = ada.put(f"{url}/aliases/candidate/", {"version": candidate.version}, format="json")
    assert other.status_code == 200
    browser = Client()
    browser.force_login(world["ada"])
    loosen = {"p99_latency_ms": "5000", "min_success_rate": "99"}
    page = browser.post(f"/models/{model.name}/", loosen)
    assert page.status_code == 200 and "cannot change until it ends" in page.content.decode()
    stored = Model.objects.get(pk=model.pk)
    assert stored.sla_p99_latency_ms == 500 and stored.aliases.get(name="production").version == (
        baseline
    )


def test_a_running_release_holds_its_sla_and_production_alias(release_world, ticking, make_user):
    world = release_world
    root = make_user("root", superuser=True)
    model, baseline, candidate = _model_with_baseline(world, "rel_hold", 2, SLA)
    alias_set(model=model, name="production", version=baseline, actor=world["ada"])
    with Traffic(world["port"], "rel_hold") as traffic:
        traffic.more(20)  # traffic flows
        release = _start(world, candidate)
        unset = (
            "min_throughput_rps",
            "p95_first_token_ms",
            "p95_inter_token_ms",
            "min_tokens_per_s",
        )
        assert release.sla == {**SLA, **dict.fromkeys(unset, None)}
        release = _tick_until(ticking, release, {"WAITING_APPROVAL"})
        _refusals_while_active(world, model, baseline, candidate, root)
        # Tighten the live SLA behind the service's back: with the live SLA the gates would
        # roll back (avg latency > 0.001 ms); the release judges by the SLA it started with.
        Model.objects.filter(pk=model.pk).update(sla_p99_latency_ms=0.001)
        release_action(release=release, action="approve", actor=world["rita"])
        release = _tick_until(ticking, release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
    assert release.phase == "SUCCEEDED", release.reason
    checks = [e.data for e in release.events.filter(kind="analysis")]
    assert checks and "0.001" not in str(checks)
    # The release itself moved production when it promoted; now the model is free again.
    assert model.aliases.get(name="production").version_id == candidate.pk
    ada = _api(world["ada"])
    freed = ada.patch(f"/api/v1/models/{model.name}/", {"sla": SLA}, format="json")
    assert freed.status_code == 200, freed.content
    back = ada.put(
        f"/api/v1/models/{model.name}/aliases/production/",
        {"version": baseline.version},
        format="json",
    )
    assert back.status_code == 200
    _unload(world, model)


def test_a_rolled_back_release_frees_its_model(release_world, ticking):
    world = release_world
    model, baseline, candidate = _model_with_baseline(world, "rel_free", 2, SLA)
    release = _start(world, candidate)
    loosen = {"sla": {"min_success_rate": 50}}
    url = f"/api/v1/models/{model.name}/"
    answer = _api(world["ada"]).patch(url, loosen, format="json")
    assert answer.status_code == 409
    assert f"on {world['cluster'].name}" in answer.json()["errors"][0]["message"]
    release_action(release=release, action="rollback", actor=world["rita"])
    release = _tick_until(ticking, release, {"ROLLED_BACK", "FAILED"})
    assert _api(world["ada"]).patch(url, loosen, format="json").status_code == 200
    _unload(world, model)
