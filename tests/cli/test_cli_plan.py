"""`switchyard plan` as a person or a CI job runs it: a subprocess talking to the real ASGI app
(the session's daphne) on PostgreSQL. The plans here are not ticked (no worker serves their
queue): what is checked is what the CLI sends and shows, who may approve, and its exit codes;
tests/plans/test_plan_flow.py walks plans through real releases."""

import json
import os
import subprocess
import sys

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.services import api_token_create
from deployments.services import cluster_create, node_create, serving_state_set
from plans.models import ReleasePlan
from tests.conftest import ROOT
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(daphne_server, make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    with transaction.atomic():  # the serving states are set under a row lock
        found = _world(make_user)
    remy = make_user("remy", role="release-managers")
    tokens = {u.username: api_token_create(user=u, name="ci")[1] for u in (found["rita"], remy)}
    return {**found, "url": f"http://{daphne_server}", "tokens": tokens, "tmp": tmp_path}


def _world(make_user) -> dict:
    found = release_world(make_user)
    for name in ("eu", "us"):
        cluster = cluster_create(actor=found["rita"], name=name, environment="production",
                                 router={"driver": "nginx", "listen": "127.0.0.1:3"})  # fmt: skip
        serving_state_set(cluster=cluster, model=found["model"], versions=[found["versions"][0]])
        node_create(cluster=cluster, actor=found["rita"], name=f"{name}1",
                    http_url="http://127.0.0.1:9")  # fmt: skip
    return found


def switchyard(world, *args: str, user: str = "rita"):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHYARD_", "DJANGO_"))}
    env.update(SWITCHYARD_URL=world["url"], SWITCHYARD_TOKEN=world["tokens"][user],
               SWITCHYARD_CONFIG=str(world["tmp"] / f"{user}.toml"))  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "switchyard_cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_a_plan_started_shown_and_approved_by_a_second_person_from_the_cli(world):
    code, out, err = switchyard(
        world, "plan", "start", "risk_score:2", "--wave", "prod", "--wave", "eu,us",
        "--approve-waves", "2", "--bake", "600", "--steps", "25,100", "--interval", "5",
        "--on-failure", "rollback",
    )  # fmt: skip
    assert code == 0, (out, err)
    plan = ReleasePlan.objects.get()
    assert plan.on_failure == "rollback" and plan.phase == "PENDING"
    assert [w["clusters"] for w in plan.waves] == [["prod"], ["eu", "us"]]
    assert [w["approval"] for w in plan.waves] == [False, True]
    assert plan.waves[1]["bake_s"] == 600 and plan.waves[0]["release"]["steps"] == [25, 100]
    assert f"plan {plan.pk}: pending (wave 1 of 2)" in out
    code, out, err = switchyard(world, "plan", "status", str(plan.pk))
    assert code == 0, err
    assert "wave 1: prod -" in out and "wave 2 (approval): eu -; us -" in out
    ReleasePlan.objects.filter(pk=plan.pk).update(phase="WAITING_APPROVAL", wave_index=1)
    code, out, err = switchyard(world, "plan", "status", str(plan.pk), "--wait", "--timeout", "5")
    assert code == 4, (out, err)  # waits for a person, and says who and how
    assert "approval of wave 2 by a release manager other than rita" in out
    assert f"switchyard plan approve {plan.pk}" in out
    code, out, err = switchyard(world, "plan", "approve", str(plan.pk))
    assert code == 2 and "four-eyes" in err  # the author may not approve
    code, out, err = switchyard(world, "plan", "approve", str(plan.pk), "--comment", "CAB-7",
                                "--output", "json", user="remy")  # fmt: skip
    assert code == 0, err
    answer = json.loads(out)
    assert (
        answer["approvals"][0]["actor"] == "remy" and answer["approvals"][0]["comment"] == "CAB-7"
    )


def test_halt_and_a_plan_file_from_the_cli(world):
    waves = [{"clusters": ["prod"], "release": {"steps": [50, 100]}},
             {"clusters": ["eu"], "bake_s": 60, "approval": True}]  # fmt: skip
    path = world["tmp"] / "plan.json"
    path.write_text(json.dumps(waves))
    code, out, err = switchyard(world, "plan", "start", "risk_score:2", "--plan-file", str(path))
    assert code == 0, (out, err)
    plan = ReleasePlan.objects.get()
    assert plan.waves[1] == {"clusters": ["eu"], "release": {}, "bake_s": 60.0, "approval": True}
    code, out, err = switchyard(world, "plan", "halt", str(plan.pk), "--comment", "incident 9",
                                user="remy")  # fmt: skip
    assert code == 0, err
    assert ReleasePlan.objects.get().pending_action["action"] == "halt"
    code, out, err = switchyard(world, "plan", "resume", str(plan.pk))
    assert code == 2 and "Cannot resume: the plan is PENDING" in err, err
    code, out, err = switchyard(world, "plan", "start", "risk_score:2")
    assert code == 2 and "--wave" in err


def test_a_plans_wait_exits_1_when_it_rolled_back_and_3_when_the_timeout_runs_out(world):
    """The release commands' codes: 1 finished but failed, 3 the wait ran out first (the plan
    goes on on the server)."""
    code, out, err = switchyard(world, "plan", "start", "risk_score:2", "--wave", "prod")
    assert code == 0, (out, err)
    plan = ReleasePlan.objects.get()
    # No worker serves this test's queue: the plan stays PENDING while the CLI waits.
    code, out, err = switchyard(world, "plan", "status", str(plan.pk), "--wait", "--timeout", "1")
    assert code == 3, (out, err)
    ReleasePlan.objects.filter(pk=plan.pk).update(
        phase="ROLLED_BACK", reason="wave 1: prod: rolled_back", finished_at=timezone.now()
    )
    code, out, err = switchyard(world, "plan", "status", str(plan.pk), "--wait")
    assert code == 1 and "rolled_back" in (out + err), (out, err)
