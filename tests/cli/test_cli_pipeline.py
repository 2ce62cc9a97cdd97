"""What a pipeline needs from the CLI (issue #30): `--wait` never waits for what only a person
can do (a release at a manual gate or paused exits 4 with what it waits for and the command
that continues it; `--fail-on-pause` asks for the rollback instead and exits 1 with its
cause); a re-run of the same build answers the existing version; teams, a cluster's router
and nodes, and one token per role. The same live daphne, worker, Triton nodes and router as
tests/cli/test_cli_flow.py."""

import json
import time

import pytest
from django.contrib.auth.models import Group

from accounts.services import api_token_create
from integrations.routers.access_log import last_lines, parse_line
from models_registry.models import Model, Team
from models_registry.services import team_member_add
from releases import routing
from releases.selectors import routed_rate
from tests.cli.test_cli_flow import (
    RISK_SCORE,
    docs_ci_script,
    login,
    register,
    run_ci_script,
    smoke_cluster,  # noqa: F401 - fixture
    stack,  # noqa: F401 - fixture
    switchyard,
)
from tests.conftest import wait_for
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _unload,
    release_world,  # noqa: F401 - fixture
)
from tests.ticking import Lanes, Ticking

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]


def _with_role_tokens(world, *args: str) -> tuple[int, str, str]:
    """The CLI with no config file and one token per role in the environment."""
    tokens = {
        "REGISTER_TOKEN": api_token_create(user=world["ada"], name="ci-register")[1],
        "RELEASE_TOKEN": api_token_create(user=world["rita"], name="ci-release")[1],
    }
    return switchyard(world, *args, user="nobody", extra_env=tokens)


def test_a_pipeline_reruns_reads_its_cluster_and_never_waits_for_a_person(stack):  # noqa: F811
    world = stack
    login(world, "ada")
    login(world, "rita")
    code, out, err = switchyard(
        world,
        *["model", "register", RISK_SCORE, "--model", "risk_score", "--label", "build-1"],
        *["--folder", "1", "--team", "fraud", "--wait", "--timeout", "120", "-o", "json"],
        user="ada",
    )
    assert code == 0, (out, err)
    v1 = json.loads(out)
    # The model made by --team, then the upload: each says the model has no SLA.
    assert err.count("warning: Model risk_score has no SLA") == 2, err
    # A re-run of the same build: 409 (exit 2) without the flag, the same version with it.
    again = ["model", "register", RISK_SCORE, "--model", "risk_score", "--folder", "1"]
    code, out, err = switchyard(world, *again, "--label", "build-1b", user="ada")
    assert code == 2 and "HTTP 409" in err, (out, err)
    code, out, err = switchyard(
        world, *again, "--label", "build-1b", "--return-existing", "-o", "json", user="ada"
    )
    assert code == 0 and json.loads(out)["version"] == v1["version"], (out, err)
    assert "warning: Model risk_score has no SLA" in err, err
    code, out, err = switchyard(
        world, *["model", "sla", "set", "risk_score", "--p99-latency-ms", "250"], user="ada"
    )
    assert code == 0 and "p99_latency_ms 250" in out, (out, err)
    code, out, err = switchyard(
        world, *again, "--label", "build-1b", "--return-existing", user="ada"
    )
    assert code == 0 and "no SLA" not in err, (out, err)
    code, out, err = switchyard(world, "team", "list", "-o", "json")
    assert code == 0, (out, err)
    teams = {t["name"]: t["members"] for t in json.loads(out)}
    assert "ada" in teams["fraud"], teams
    # One token per role: the algorithm token registers, the release manager's deploys.
    code, out, err = _with_role_tokens(
        world,
        "--token-env",
        "REGISTER_TOKEN",
        *["model", "register", RISK_SCORE],
        *["--model", "risk_score", "--folder", "2", "--label", "build-2", "--wait"],
    )
    assert code == 0, (out, err)
    code, out, err = _with_role_tokens(
        world, "--token-env", "REGISTER_TOKEN", "deploy", "risk_score:1", "--cluster", "canary"
    )
    assert code == 2 and "HTTP 403" in err, (out, err)
    code, out, err = _with_role_tokens(
        world,
        "--token-env",
        "RELEASE_TOKEN",
        *["deploy", "risk_score:1", "--cluster", "canary"],
        "--wait",
    )
    assert code == 0, (out, err)
    code, out, err = _with_role_tokens(world, "--token-env", "NO_SUCH_TOKEN", "team", "list")
    assert code == 2 and "NO_SUCH_TOKEN" in err, (out, err)
    code, out, err = switchyard(world, "cluster", "show", "canary", "-o", "json")
    assert code == 0, (out, err)
    shown = json.loads(out)
    assert shown["router"]["url"] == world["cluster"].router["url"], shown
    assert {n["name"] for n in shown["status"]["nodes"]} == {
        n.name for n in world["cluster"].nodes.all()
    }
    code, out, err = switchyard(world, "cluster", "show", "canary")
    assert f"router: {world['cluster'].router['url']}" in out and "risk_score:1" in out, out
    beat = Ticking(Lanes.of(world["worker"]))
    beat.start()
    try:
        code, out, err = switchyard(
            world,
            *["release", "start", "risk_score:2", "--cluster", "canary", "--steps", "20,100"],
            *["--manual-gates", "20", "--interval", "2", "--wait", "--timeout", "120"],
        )
        assert code == 4, (out, err)
        assert "waits for approval to enter step 1 (20%)" in out, out
        release_id = int(out.split("continue: switchyard release approve ")[1].split()[0])
        code, out, err = switchyard(
            world, "release", "status", str(release_id), "--wait", "-o", "json"
        )
        answer = json.loads(out)
        assert code == 4 and answer["cli_outcome"] == "needs_person", (out, err)
        assert answer["state"] == "waiting_approval" and answer["outcome_reason"] is None
        assert answer["waiting_for"].startswith("approval to enter step 1"), answer

        code, out, err = switchyard(
            world,
            "release",
            "status",
            str(release_id),
            "--wait",
            "--fail-on-pause",
            "--timeout",
            "120",
        )
        assert code == 1 and "-> rolled_back" in out, (out, err)
        assert "reason: rollback by rita: --fail-on-pause: it waited for approval" in out, out
        code, out, err = switchyard(world, "release", "status", str(release_id), "-o", "json")
        answer = json.loads(out)
        assert answer["outcome"] == "rolled_back" and answer["waiting_for"] is None
        # The cause, not the last phase's message ("candidate at 0% and unloaded; ...").
        assert answer["outcome_reason"].startswith("rollback by rita"), answer
        assert answer["reason"] != answer["outcome_reason"]
    finally:
        beat.stop()
    _unload(world, Model.objects.get(name="risk_score"))


def _router_log_seen(world) -> dict:
    """What the router's access log held, and the rate read from it (for a failure)."""
    log = routing.access_log_path(world["cluster"])
    lines, _whole = last_lines(log, 1 << 24) if log is not None else ([], True)
    parsed = [e for e in map(parse_line, lines[:10]) if e is not None]
    return {
        "log": str(log),
        "lines": len(lines),
        "first_lines": lines[:3],
        "first_ts": parsed[0].ts if parsed else None,
        "now": time.time(),
        "rate": routed_rate(cluster=world["cluster"], model="risk_score"),
    }


def test_the_docs_ci_script_at_low_traffic_warns_pauses_rolls_back_and_reruns(stack, make_user):  # noqa: F811
    """docs/CLI.md's script, nothing else, against the real stack with ~10 req/s through
    the router: a good build is promoted (the missing SLA warned about at upload and start),
    its re-run exits 0 with the same version, a build whose first step cannot reach
    min_requests is warned about with the rate needed and ends with exit 4 once it pauses,
    and a faulty build exits 1 naming the gate that rolled it back."""
    world = stack
    ci = make_user("ci", role="algorithm")
    ci.groups.add(Group.objects.get(name="release-managers"))
    admin = make_user("admin", superuser=True)
    team_member_add(team=Team.objects.get(name="fraud"), username="ci", actor=admin)
    for user in ("ci", "ada", "rita"):
        login(world, user)
    register(world, 1, "build-1", "--team", "fraud")
    code, out, err = switchyard(world, "deploy", "risk_score:1", "--cluster", "canary", "--wait")
    assert code == 0, (out, err)
    routing.router_for(world["cluster"]).apply(routing.router_state(world["cluster"], []))
    script, env = docs_ci_script(world["tmp"])
    beat = Ticking(Lanes.of(world["worker"]))
    beat.start()
    try:
        with Traffic(world["port"], "risk_score", clients=1, pause_s=0.1):
            good = '--interval 2 --analysis {"min_requests":5,"latency_tolerance":5}'
            run = {"REGISTER_ARGS": "--folder 2", "STEPS": "50,100", "RELEASE_ARGS": good}
            done = run_ci_script(world, script, env, BUILD="b2", **run)
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert "risk_score:2 promoted" in done.stdout
            assert done.stderr.count("warning: Model risk_score has no SLA") == 2, done.stderr
            again = run_ci_script(world, script, env, BUILD="b2-rerun", **run)
            assert again.returncode == 0, (again.stdout, again.stderr)
            assert "registered risk_score:2" in again.stdout
            assert "risk_score:2 already serves on canary" in again.stdout

            # The rate is read from the router's log once it covers 10 s (releases/selectors.py
            # routed_rate); on a fast machine b2's release can finish sooner after the traffic
            # began.
            wait_for(
                lambda: routed_rate(cluster=world["cluster"], model="risk_score"),
                timeout_s=60,
                what="10 s of traffic in the router's log",
            )
            thin = '--interval 2 --analysis {"min_requests":50,"max_inconclusive_checks":1}'
            done = run_ci_script(
                world,
                script,
                env,
                BUILD="b3",
                REGISTER_ARGS="--folder 4",  # twice as slow: only a judged step would tell
                STEPS="10,100",
                RELEASE_ARGS=thin,
            )
            assert done.returncode == 4, (done.stdout, done.stderr)
            assert "warning: Too little traffic to judge the first step" in done.stderr, (
                done.stderr.splitlines(),
                _router_log_seen(world),
            )
            assert "It needs at least 250.00 req/s through the router" in done.stderr
            assert "release waits for a resume or a rollback (paused: " in done.stdout
            paused = json.loads((world["tmp"] / "b3" / "release.json").read_text())
            assert paused["state"] == "paused" and paused["cli_outcome"] == "needs_person"
            code, out, err = switchyard(world, "release", "rollback", str(paused["id"]))
            assert code == 0, (out, err)
            code, out, err = switchyard(
                world, "release", "status", str(paused["id"]), "--wait", "--timeout", "120"
            )
            assert code == 1 and "reason: rollback by rita" in out, (out, err)

            faulty = '--interval 2 --analysis {"min_requests":5,"max_failed_checks":1}'
            done = run_ci_script(
                world,
                script,
                env,
                BUILD="b4",
                REGISTER_ARGS="--folder 3",
                STEPS="25,50,100",
                RELEASE_ARGS=faulty,
            )
            assert done.returncode == 1, (done.stdout, done.stderr)
            reason = done.stdout.split("risk_score:4 rolled back: ", 1)[1].splitlines()[0]
            assert reason.startswith(("fast guard: ", "1/1 failed checks")), done.stdout
    finally:
        beat.stop()
    assert _loaded(world, "risk_score") == [{"2"}, {"2"}]
    _unload(world, Model.objects.get(name="risk_score"))
