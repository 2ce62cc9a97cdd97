"""Release plans end to end: three clusters of one real Triton node each, each behind a real
nginx router of its own, client traffic through both routers, the plan and its releases ticked
by the session's releases-lane worker with beat's two tick entries queued on a timer
(tests/ticking.py), loads on its fleet-lane worker."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from deployments.executor import deployment_run
from deployments.freezes import freeze_window_create, freeze_window_delete
from deployments.services import cluster_create, deployment_create, serving_versions
from health.models import Alert
from integrations.triton.local import free_ports
from models_registry.services import model_create, team_create
from notifications.models import Delivery
from notifications.services import webhook_create
from plans.models import PlanRelease, ReleasePlan
from releases import routing
from releases.services import release_action
from tests.clients import api_as
from tests.conftest import session_node_key, wait_for
from tests.deploying import pushed
from tests.nodes import register_nodes
from tests.notifications.receiver import Receiver
from tests.notifications.test_webhook_flows import _deliver_all
from tests.registry.archives import register_risk_score_as
from tests.releases.test_release_flow import Traffic, _unload_left_behind
from tests.ticking import Ticking

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

SLA = {"p99_latency_ms": 500, "min_success_rate": 99.0}
PLAN_EVENTS = ["plan.wave_started", "plan.waiting_approval", "plan.halted", "plan.finished"]
SECRET = "plan-receiver-secret-0123"
CLUSTERS = ("edge", "core", "far")
RELEASE = {
    "steps": [50, 100],
    "step_interval_s": 2,
    "analysis": {"min_requests": 10, "max_failed_checks": 1, "latency_tolerance": 5},
    "progress_deadline_s": 60,
}


@pytest.fixture(scope="module")
def far_node(tmp_path_factory):
    """A third real Triton node for the `far` cluster, for this module's tests only."""
    from integrations.triton.local import start_cluster

    cluster = start_cluster(1, tmp_path_factory.mktemp("far"), metrics_interval_ms=1000,
                            node_key=session_node_key(), name_prefix="far")  # fmt: skip
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def fleet(triton_cluster, far_node, lanes, settings, make_user):
    """`edge`, `core` and `far`: one real node each (the session's two and this module's
    one), a router each; rita and remy release managers, ada in the algorithm team. Ticked by
    the lanes while the test runs."""
    settings.SWITCHYARD_STORAGE_ROOT = lanes.storage
    settings.SWITCHYARD_DEPLOY_DRAIN_S = 0.2
    rita, remy = (
        make_user("rita", role="release-managers"),
        make_user("remy", role="release-managers"),
    )
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    world = {"rita": rita, "remy": remy, "ada": ada, "clusters": {}, "ports": {}}
    key = triton_cluster.node_key.value
    nodes = [*triton_cluster.nodes, *far_node.nodes]
    for name, node, port in zip(CLUSTERS, nodes, free_ports(3), strict=True):
        router = {"driver": "nginx", "listen": f"127.0.0.1:{port}",
                  "prefix_dir": str(lanes.storage.parent / f"router-{name}-{port}")}  # fmt: skip
        cluster = cluster_create(actor=rita, name=name, environment="production", router=router,
                                 api_key=key)  # fmt: skip
        register_nodes(cluster, [node], actor=rita)
        world["clusters"][name], world["ports"][name] = cluster, port
    try:
        with Ticking(lanes) as ticking:
            world["ticking"] = ticking
            yield world
    finally:
        for cluster in world["clusters"].values():
            routing.router_for(cluster).stop()
        routing._DRIVERS.clear()
        _unload_left_behind(triton_cluster)
        _unload_left_behind(far_node)


def _serving(world, name: str, candidate_variant: int, **faults: float):
    """`name` serving v1 on every cluster through its router; the candidate registered
    (`faults`: the faulty-by-setting variant's, tests/registry/archives.py)."""
    model = model_create(name=name, team="fraud", actor=world["ada"], sla=SLA)
    baseline = register_risk_score_as(model, world["ada"], 1)
    for cluster in world["clusters"].values():
        pushed(deployment_create(cluster=cluster, version=baseline, actor=world["rita"]))
        routing.router_for(cluster).apply(routing.router_state(cluster, []))
    return model, register_risk_score_as(model, world["ada"], candidate_variant, **faults)


def _plan_until(plan_id: int, phases: set[str], timeout_s: float = 150.0) -> ReleasePlan:
    seen = []

    def check():
        plan = ReleasePlan.objects.get(pk=plan_id)
        if not seen or seen[-1] != (plan.phase, plan.reason):
            seen.append((plan.phase, plan.reason))
        return plan if plan.phase in phases else None

    try:
        return wait_for(check, timeout_s=timeout_s, what=f"plan in {sorted(phases)}")
    except RuntimeError:
        raise AssertionError(f"plan {plan_id} not in {phases}: seen {seen[-8:]}") from None


def _cell(plan_id: int, cluster: str) -> PlanRelease:
    return PlanRelease.objects.select_related("release").get(plan_id=plan_id, cluster__name=cluster)


def _unload(world, model) -> None:
    for cluster in world["clusters"].values():
        unload = deployment_create(cluster=cluster, version=None, model=model, actor=world["rita"])
        deployment_run(deployment_id=unload.pk)


@pytest.fixture
def receiver():
    with Receiver() as running:
        yield running


def test_a_plan_walks_its_waves_behind_the_barrier_and_a_second_person_approves(
    fleet, receiver, client
):
    world = fleet
    model, candidate = _serving(world, "plan_good", 2)
    waves = [{"clusters": ["edge"], "release": RELEASE, "bake_s": 2},
             {"clusters": ["core", "far"], "release": RELEASE, "approval": True}]  # fmt: skip
    hook = webhook_create(actor=world["rita"], url=receiver.url, secret=SECRET, events=PLAN_EVENTS)
    with Traffic(world["ports"]["edge"], "plan_good") as edge, \
            Traffic(world["ports"]["core"], "plan_good") as core, \
            Traffic(world["ports"]["far"], "plan_good") as far:  # fmt: skip
        edge.more(20)
        core.more(20)
        far.more(20)
        answer = api_as(world["rita"]).post("/api/v1/release-plans/", {
            "model": "plan_good", "candidate_version": candidate.version, "waves": waves,
        }, format="json")  # fmt: skip
        assert answer.status_code == 201, answer.content
        plan_id = answer.json()["id"]
        waiting = _plan_until(plan_id, {"WAITING_APPROVAL", "HALTED", "ROLLED_BACK"})
        assert waiting.phase == "WAITING_APPROVAL" and waiting.wave_index == 1, waiting.reason
        # The barrier: wave 1's release succeeded and baked; nothing started on core or far.
        assert _cell(plan_id, "edge").release.phase == "SUCCEEDED"
        assert _cell(plan_id, "core").release is None and _cell(plan_id, "far").release is None
        url = f"/api/v1/release-plans/{plan_id}/actions/"
        assert (
            api_as(world["rita"]).post(url, {"action": "approve"}, format="json").status_code == 403
        )
        approved = api_as(world["remy"]).post(url, {"action": "approve", "comment": "CAB ok"},
                                           format="json")  # fmt: skip
        assert approved.status_code == 200, approved.content
        done = _plan_until(plan_id, {"SUCCEEDED", "HALTED", "ROLLED_BACK"})
        core.more(20)
        far.more(20)
    assert done.phase == "SUCCEEDED", done.reason
    assert done.finished_at is not None
    started = {}
    for cluster in CLUSTERS:
        release = _cell(plan_id, cluster).release
        assert release.phase == "SUCCEEDED" and release.candidate_id == candidate.pk
        started[cluster] = release.created_at
    # In order: wave 2's releases started after wave 1's had succeeded and baked 2 s.
    edge_done = _cell(plan_id, "edge").release.finished_at
    assert min(started["core"], started["far"]) >= edge_done + timedelta(seconds=2)
    assert (edge.failed, core.failed, far.failed) == (0, 0, 0), (edge.summary(), core.summary(),
                                                                 far.summary())  # fmt: skip
    assert core.versions.get("2", 0) > 0 and far.versions.get("2", 0) > 0
    detail = api_as(world["ada"]).get(f"/api/v1/release-plans/{plan_id}/").json()
    messages = [e["message"] for e in detail["events"]]
    assert any("wave 1 succeeded; baking 2 s" in m for m in messages), messages
    assert any("remy approved wave 2: CAB ok" in m for m in messages), messages
    assert any("every wave succeeded" in m for m in messages), messages
    assert [c["phase"] for w in detail["waves"] for c in w["clusters"]] == ["SUCCEEDED"] * 3
    cells = [c for w in detail["waves"] for c in w["clusters"]]
    assert [(c["step"], c["gate"], c["gate_failed"]) for c in cells] == [("2/2", "pass", [])] * 3
    # Webhooks: each transition once, signed, with the plan in its data.
    _deliver_all()
    got = receiver.wait_for(Delivery.objects.filter(webhook=hook).count())
    told = [(r.headers["x-switchyard-event"], r.document["data"]["wave"]) for r in got]
    assert told == [("plan.wave_started", 1), ("plan.waiting_approval", 2),
                    ("plan.wave_started", 2), ("plan.finished", 2)], told  # fmt: skip
    assert all(r.is_signed_with(SECRET) for r in got)
    assert got[-1].document["data"]["phase"] == "SUCCEEDED"
    # The plan's page: every cell succeeded, a cost row per cluster.
    client.force_login(world["ada"])
    page = client.get(f"/plans/{plan_id}/").content.decode()
    cells = re.findall(r'data-testid="plan-cell" data-cluster="(\w+)" data-phase="(\w+)"', page)
    assert cells == [(name, "SUCCEEDED") for name in CLUSTERS], cells
    # No collector ran here, so no cost was rolled up: each cluster's row shows none yet.
    card = page.split('data-testid="plan-cost"', 1)[1].split("</table>", 1)[0]
    assert "<td>edge</td>" in card and "<td>core</td>" in card
    _unload(world, model)


def test_a_rollback_in_one_wave_halts_the_plan_before_the_next_wave(fleet):
    world = fleet
    model, candidate = _serving(world, "plan_bad", 3)  # variant 3 fails its requests
    waves = [{"clusters": ["edge"], "release": RELEASE}, {"clusters": ["core"], "release": RELEASE}]
    with Traffic(world["ports"]["edge"], "plan_bad") as edge:
        edge.more(20)
        answer = api_as(world["rita"]).post("/api/v1/release-plans/", {
            "model": "plan_bad", "candidate_version": candidate.version, "waves": waves,
        }, format="json")  # fmt: skip
        plan_id = answer.json()["id"]
        halted = _plan_until(plan_id, {"HALTED", "SUCCEEDED", "WAITING_APPROVAL"})
    assert halted.phase == "HALTED", halted.reason
    assert "edge: rolled_back" in halted.reason and "no further release starts" in halted.reason
    assert _cell(plan_id, "edge").release.phase == "ROLLED_BACK"
    assert _cell(plan_id, "core").release is None  # the next wave never started
    url = f"/api/v1/release-plans/{plan_id}/actions/"
    answer = api_as(world["remy"]).post(
        url, {"action": "rollback", "comment": "stop"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    ended = _plan_until(plan_id, {"ROLLED_BACK"})
    assert ended.finished_at is not None and _cell(plan_id, "core").release is None
    halted_rows = AuditEvent.objects.filter(action="plan.halted", object_id=str(plan_id))
    assert halted_rows.count() == 1 and "edge: rolled_back" in halted_rows.get().details["reason"]
    finished = AuditEvent.objects.get(action="plan.finished", object_id=str(plan_id))
    assert finished.details["phase"] == "ROLLED_BACK"
    # The halt fired a warning on the alerts page, resolved once the plan rolled back.
    alert = Alert.objects.get(kind="plan_halted", model_name="plan_bad")
    assert alert.severity == "warning" and f"Plan {plan_id} (plan_bad v2) halted" in alert.summary
    assert alert.state == "resolved" and alert.details["plan_id"] == plan_id
    _unload(world, model)


def test_a_freeze_holds_a_wave_and_pauses_a_running_release_at_its_next_gate(fleet):
    world = fleet
    model, candidate = _serving(world, "plan_frozen", 2)
    core = world["clusters"]["core"]
    freeze = freeze_window_create(actor=world["rita"], cluster=core, reason="core change freeze",
                                  starts_at=timezone.now() - timedelta(minutes=1),
                                  ends_at=timezone.now() + timedelta(hours=1))  # fmt: skip
    slow = {**RELEASE, "step_interval_s": 4}  # time to freeze core while it holds 50 %
    waves = [{"clusters": ["edge"], "release": RELEASE}, {"clusters": ["core"], "release": slow}]
    with Traffic(world["ports"]["edge"], "plan_frozen") as edge, \
            Traffic(world["ports"]["core"], "plan_frozen") as traffic:  # fmt: skip
        edge.more(20)
        traffic.more(20)
        answer = api_as(world["rita"]).post("/api/v1/release-plans/", {
            "model": "plan_frozen", "candidate_version": candidate.version, "waves": waves,
        }, format="json")  # fmt: skip
        assert answer.status_code == 201, answer.content
        plan_id = answer.json()["id"]

        def core_waits():
            plan = ReleasePlan.objects.get(pk=plan_id)
            return plan if plan.wave_index == 1 and "core is frozen" in plan.reason else None

        held = wait_for(core_waits, timeout_s=150, what="wave 2 held by core's freeze")
        assert held.phase == "RUNNING" and "core change freeze" in held.reason
        assert _cell(plan_id, "edge").release.phase == "SUCCEEDED"
        assert _cell(plan_id, "core").release is None  # nothing starts into the freeze
        freeze_window_delete(actor=world["rita"], window=freeze)
        release_id = wait_for(lambda: _cell(plan_id, "core").release_id, timeout_s=60,
                              what="core's release once the freeze ended")  # fmt: skip
        world["ticking"].until(release_id, lambda r: r.phase == "PROGRESSING" and
                               r.candidate_weight == 50.0, "core at 50 %", 90)  # fmt: skip
        again = freeze_window_create(actor=world["rita"], cluster=core, reason="incident freeze",
                                     starts_at=timezone.now() - timedelta(minutes=1),
                                     ends_at=timezone.now() + timedelta(hours=1))  # fmt: skip
        paused = world["ticking"].phase(release_id, {"PAUSED", "SUCCEEDED", "ROLLED_BACK"}, 90)
        assert paused.phase == "PAUSED" and paused.candidate_weight == 50.0, paused.reason
        assert "not going to 100%" in paused.reason and "incident freeze" in paused.reason
        freeze_window_delete(actor=world["rita"], window=again)
        release_action(release=paused, action="resume", actor=world["remy"], reason="thawed")
        done = _plan_until(plan_id, {"SUCCEEDED", "HALTED", "ROLLED_BACK"})
    assert done.phase == "SUCCEEDED", done.reason
    assert traffic.failed == 0 and edge.failed == 0, (traffic.summary(), edge.summary())
    _unload(world, model)


def test_a_failure_in_wave_2_with_rollback_leaves_every_cluster_on_the_baseline(fleet):
    """A candidate ten times slower: wave 1 (edge) tolerates it and promotes it, wave 2 (core
    and far) does not; its failure rolls the wave back and brings v1 back on edge."""
    world = fleet
    model, candidate = _serving(world, "plan_back", 5, failure_rate=0.0, extra_ms=20.0)
    lenient = {**RELEASE, "analysis": {**RELEASE["analysis"], "latency_tolerance": 100}}
    strict = {**RELEASE, "analysis": {**RELEASE["analysis"], "latency_tolerance": 2}}
    waves = [{"clusters": ["edge"], "release": lenient, "bake_s": 2},
             {"clusters": ["core", "far"], "release": strict}]  # fmt: skip
    with Traffic(world["ports"]["edge"], "plan_back") as edge, \
            Traffic(world["ports"]["core"], "plan_back") as core, \
            Traffic(world["ports"]["far"], "plan_back") as far:  # fmt: skip
        for traffic in (edge, core, far):
            traffic.more(20)
        answer = api_as(world["rita"]).post("/api/v1/release-plans/", {
            "model": "plan_back", "candidate_version": candidate.version, "waves": waves,
            "on_failure": "rollback",
        }, format="json")  # fmt: skip
        assert answer.status_code == 201, answer.content
        plan_id = answer.json()["id"]
        ended = _plan_until(plan_id, {"ROLLED_BACK", "SUCCEEDED", "HALTED"}, timeout_s=200)
        for traffic in (edge, core, far):
            traffic.more(50)  # answered by the baseline again
    assert ended.phase == "ROLLED_BACK", ended.reason
    assert ended.finished_at is not None
    edge_cell = _cell(plan_id, "edge")
    assert edge_cell.release.phase == "SUCCEEDED", edge_cell.release.reason  # v5 promoted there
    assert edge_cell.revert is not None, edge_cell.revert_error
    edge_cell.revert.refresh_from_db()
    assert edge_cell.revert.phase == "SUCCEEDED" and edge_cell.revert.candidate.version == 1
    assert edge_cell.revert.strategy == "blue_green"
    wave_2 = [_cell(plan_id, name).release for name in ("core", "far")]
    assert [r.phase for r in wave_2] == ["ROLLED_BACK", "ROLLED_BACK"], [r.reason for r in wave_2]
    why = [r.outcome_reason for r in wave_2]
    assert any("failed checks" in w and "> 2×" in w for w in why), why  # the strict gate
    # Every cluster ends on the baseline: what it serves, and what its clients got last.
    for name, traffic in (("edge", edge), ("core", core), ("far", far)):
        serving = serving_versions(cluster=world["clusters"][name], model=model)
        assert [v.version for v in serving] == [1], (name, serving)
        assert traffic.failed == 0, (name, traffic.summary())
    assert edge.versions.get("1", 0) > 0 and edge.versions.get(str(candidate.version), 0) > 0
    detail = api_as(world["ada"]).get(f"/api/v1/release-plans/{plan_id}/").json()
    assert detail["waves"][0]["clusters"][0]["revert_phase"] == "SUCCEEDED"
    assert detail["outcome"] == "rolled_back"
    _unload(world, model)
