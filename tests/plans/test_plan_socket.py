"""The plan page's socket (/ws/plans/<id>/) through the real ASGI server and the Redis channel
layer: it speaks when the plan changes, when its tick starts a release, and when that release
changes; and a plan's ?wait= wakes when the plan comes to wait for a person."""

import json
import threading

import pytest
from django.db import connection, transaction
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from accounts.services import ws_ticket_create
from plans.models import PlanRelease, ReleasePlan
from plans.tick import plan_tick
from releases import events as release_events
from tests.clients import api_as
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    with transaction.atomic():  # serving_state_set locks rows: it runs inside a transaction
        return release_world(make_user)


def _start(world, **wave) -> int:
    body = {"model": "risk_score", "candidate_version": 2,
            "waves": [{"clusters": ["prod"], "release": {"steps": [50, 100]}, **wave}]}  # fmt: skip
    answer = api_as(world["rita"]).post("/api/v1/release-plans/", body, format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()["id"]


def _socket(server: str, user, plan_id: int):
    ticket, _ = ws_ticket_create(user=user, token=None)
    url = f"ws://{server}/ws/plans/{plan_id}/?ticket={ticket}"
    return connect(url, origin=f"http://{server}")


def _until(ws, wanted) -> list[dict]:
    """Messages received until one satisfies `wanted` (10 s each at most)."""
    seen = []
    while not seen or not wanted(seen[-1]):
        seen.append(json.loads(ws.recv(timeout=10)))
    return seen


def test_the_socket_speaks_of_the_plan_and_of_the_releases_it_started(daphne_server, world):
    plan_id = _start(world)
    with _socket(daphne_server, world["ada"], plan_id) as ws:  # any signed-in user reads
        plan_tick(plan_id=plan_id)  # the first wave's release starts on prod
        seen = _until(ws, lambda m: m == {"changed": "plan", "plan": plan_id, "phase": "RUNNING"})
        assert all(m["changed"] == "plan" for m in seen)
        release_id = PlanRelease.objects.get(plan_id=plan_id).release_id
        assert release_id is not None
        # The release's own ticks publish to its group; the socket joined it with the cell.
        release_events.publish(release_id)
        message = _until(ws, lambda m: m["changed"] == "release")[-1]
        assert message == {"changed": "release", "release": release_id, "phase": "PENDING"}
        plan = ReleasePlan.objects.get(pk=plan_id)
        plan.phase = "SUCCEEDED"
        plan.save(update_fields=["phase"])
        _until(ws, lambda m: m.get("phase") == "SUCCEEDED")


@pytest.mark.parametrize("who", ["nobody", "missing-plan"])
def test_the_socket_is_refused_to_strangers_and_for_plans_that_do_not_exist(
    daphne_server, world, who
):
    plan_id = _start(world)
    if who == "nobody":
        url = f"ws://{daphne_server}/ws/plans/{plan_id}/"
    else:
        ticket, _ = ws_ticket_create(user=world["ada"], token=None)
        url = f"ws://{daphne_server}/ws/plans/{plan_id + 1000}/?ticket={ticket}"
    with pytest.raises((InvalidStatus, ConnectionClosed)):
        with connect(url, origin=f"http://{daphne_server}") as ws:
            ws.recv(timeout=10)


def _in_own_connection(fn, **kwargs) -> None:
    try:
        fn(**kwargs)
    finally:
        connection.close()


def _halt_quietly(plan_id: int) -> None:
    """A change no waiter hears of (an update sends no signal)."""
    ReleasePlan.objects.filter(pk=plan_id).update(phase="HALTED", reason="changed later")


def test_a_plans_wait_answers_when_the_plan_comes_to_wait_for_an_approval(world):
    plan_id = _start(world, approval=True)
    client = api_as(world["ada"])
    assert client.get(f"/api/v1/release-plans/{plan_id}/?wait=soon").status_code == 400
    tick = threading.Timer(0.5, _in_own_connection, args=(plan_tick,), kwargs={"plan_id": plan_id})
    later = threading.Timer(
        8, _in_own_connection, args=(_halt_quietly,), kwargs={"plan_id": plan_id}
    )
    tick.start(), later.start()
    try:
        body = client.get(f"/api/v1/release-plans/{plan_id}/?wait=30").json()
    finally:
        later.cancel()
        tick.join(), later.join()
    # Woken by the tick's save: a wait that ran out would re-read the plan after the quiet
    # change at 8 s and answer `halted`.
    assert body["state"] == "waiting_approval" and "approval of wave 1" in body["waiting_for"]
