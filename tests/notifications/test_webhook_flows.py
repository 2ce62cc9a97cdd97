"""Webhook events from real flows on real Triton nodes and a real nginx router: a deployment
that fails because Triton cannot load the version, and gray releases that are promoted and
rolled back. Each event reaches a real local receiver once, signed."""

import io

import pytest

from deployments.executor import deployment_run
from deployments.services import deployment_create
from models_registry.services import model_create, model_version_register
from notifications.deliveries import delivery_attempt
from notifications.models import Delivery
from notifications.outbox import outbox_scan
from notifications.services import webhook_create
from releases.services import release_action, release_create
from tests.notifications.receiver import Receiver
from tests.registry.archives import example_entries, register_risk_score_as, tar_gz
from tests.releases import test_release_flow as flow
from tests.releases.test_release_flow import Traffic, _model_with_baseline, _tick_until, _unload

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]
release_world = flow.release_world  # real Triton nodes and a real nginx router
ticking = flow.ticking  # ticks from the session's lane workers
SECRET = "flow-receiver-secret-0123"
SLA = {"p99_latency_ms": 500.0, "min_success_rate": 99.0}
RELEASE_EVENTS = [
    "release.started",
    "release.step",
    "release.waiting_approval",
    "release.rolled_back",
    "release.promoted",
]
BROKEN_MODEL_PY = b"""
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights are corrupt")

    def execute(self, requests):
        return []
"""


def _deliver_all() -> int:
    due = outbox_scan()
    for delivery_id in due:
        delivery_attempt(delivery_id=delivery_id)
    return len(due)


def test_a_deployment_triton_cannot_load_is_announced_once(release_world):
    world = release_world
    model = model_create(name="wh_broken", team="fraud", actor=world["ada"])
    entries = example_entries("risk_score", 1)
    config = entries[0][1].replace(b'name: "risk_score"', b'name: "wh_broken"')
    files = [
        (name, BROKEN_MODEL_PY if name.endswith("model.py") else data) for name, data in entries[1:]
    ]
    broken = model_version_register(
        model=model,
        actor=world["ada"],
        archive=io.BytesIO(tar_gz([("config.pbtxt", config), *files])),
    )
    with Receiver() as receiver:
        webhook_create(
            actor=world["rita"], url=receiver.url, secret=SECRET, events=["deployment.failed"]
        )
        deployment = deployment_create(
            cluster=world["cluster"], version=broken, actor=world["rita"]
        )
        done = deployment_run(deployment_id=deployment.pk)
        assert done.status == "failed", done.error
        assert _deliver_all() == 1 and _deliver_all() == 0
        [got] = receiver.wait_for(1)
    assert got.is_signed_with(SECRET)
    document = got.document
    assert document["event"] == "deployment.failed" and document["severity"] == "warning"
    assert document["data"]["id"] == str(deployment.pk)
    assert "weights are corrupt" in document["data"]["error"], document
    _unload(world, model)


def test_release_phase_changes_are_announced_once_each(release_world, ticking):
    world = release_world
    model, baseline, candidate = _model_with_baseline(world, "wh_release", 2, SLA)
    with Receiver() as receiver:
        hook = webhook_create(
            actor=world["rita"], url=receiver.url, secret=SECRET, events=RELEASE_EVENTS
        )
        with Traffic(world["port"], "wh_release") as traffic:
            traffic.more(20)  # traffic flows
            release = release_create(
                cluster=world["cluster"],
                candidate=candidate,
                actor=world["rita"],
                steps=[50, 100],
                step_interval_s=2,
                manual_gates=[100],
                analysis={"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5},
                drain_s=0.5,
                progress_deadline_s=60,
            )
            release = _tick_until(ticking, release, {"WAITING_APPROVAL"})
            _deliver_all()  # the beat scans while the release runs
            release_action(release=release, action="approve", actor=world["rita"])
            release = _tick_until(ticking, release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        assert release.phase == "SUCCEEDED", release.reason
        third = register_risk_score_as(model, world["ada"], 3)
        again = release_create(
            cluster=world["cluster"],
            candidate=third,
            actor=world["rita"],
            steps=[50, 100],
            step_interval_s=2,
            drain_s=0.5,
            progress_deadline_s=60,
        )
        release_action(release=again, action="rollback", actor=world["rita"], reason="not today")
        again = _tick_until(ticking, again, {"ROLLED_BACK", "FAILED"})
        assert again.phase == "ROLLED_BACK", again.reason
        _deliver_all()
        assert _deliver_all() == 0
        got = receiver.wait_for(Delivery.objects.filter(webhook=hook).count())
    events = [(r.document["data"]["id"], r.headers["x-switchyard-event"]) for r in got]
    first = [e for rid, e in events if rid == release.pk]
    assert first[0] == "release.started" and first[-1] == "release.promoted", first
    assert {"release.step", "release.waiting_approval"} <= set(first)
    assert "release.rolled_back" not in first
    second = [e for rid, e in events if rid == again.pk]
    assert second == ["release.started", "release.rolled_back"], second
    assert all(r.is_signed_with(SECRET) for r in got)
    assert len({r.headers["x-switchyard-delivery"] for r in got}) == len(got)  # once each
    sources = list(Delivery.objects.filter(webhook=hook).values_list("source_id", flat=True))
    assert len(sources) == len(set(sources)) == len(got)
    promoted = next(
        r.document for r in got if r.headers["x-switchyard-event"] == "release.promoted"
    )
    assert promoted["data"]["model"] == "wh_release" and promoted["data"]["candidate_version"] == 2
    assert promoted["data"]["cluster"] == world["cluster"].name
    _unload(world, model)
