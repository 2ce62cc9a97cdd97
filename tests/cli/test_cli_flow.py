"""The `switchyard` CLI as a CI job runs it: a subprocess talking to a live daphne server
that queues work on a real Celery worker, real Triton nodes behind a real nginx router, and
release ticks run by that worker, `releases.tick_active` queued on a timer as celery beat does
in production (tests/ticking.py)."""

import json
import os
import pty
import re
import subprocess
import sys
import time
import tomllib

import pytest

from deployments.services import cluster_create, node_create
from integrations.triton.local import free_ports, start_cluster
from models_registry.models import Model, ModelVersion
from releases import routing
from tests.conftest import ROOT, child_environment, start_celery_worker, stop_process, wait_for
from tests.exampledata import EXAMPLES
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _unload,
    release_world,  # noqa: F401 - fixture
)
from tests.ticking import Lanes, Ticking

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]
RISK_SCORE = str(EXAMPLES / "risk_score")


def _start_daphne(log, env: dict) -> tuple[subprocess.Popen, str]:
    (port,) = free_ports(1)
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*args, "controlplane.asgi:application"],
            cwd=ROOT,
            env=child_environment(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    import http.client

    def answers() -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            conn.request("GET", "/login/")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    try:
        wait_for(answers, timeout_s=30, what="daphne", proc=proc, log=log)
    except BaseException:
        stop_process(proc)
        raise
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture
def smoke_cluster(tmp_path):
    """A node of the test's own in a cluster that serves nothing: where smoke tests run
    (never beside what canary serves)."""
    nodes = start_cluster(1, tmp_path / "smoke")
    try:
        cluster = cluster_create(actor=None, name="smoke", environment="staging")
        node = nodes.nodes[0]
        node_create(
            cluster=cluster,
            actor=None,
            name="smoke1",
            http_url=node.http_url,
            grpc_url=node.grpc_url,
            metrics_url=node.metrics_url,
        )
        yield cluster
    finally:
        nodes.stop()


@pytest.fixture
def stack(release_world, smoke_cluster, settings, tmp_path):  # noqa: F811
    """release_world's cluster and users, plus a worker and a server on one queue."""
    env = {
        "SWITCHYARD_STORAGE_ROOT": str(settings.SWITCHYARD_STORAGE_ROOT),
        "SWITCHYARD_DEPLOY_DRAIN_S": "0.2",
        "SWITCHYARD_SMOKE_CLUSTER": smoke_cluster.name,
    }
    os.environ.update(env)  # the worker inherits them too
    worker = start_celery_worker(tmp_path / "worker.log")
    try:
        proc, url = _start_daphne(
            tmp_path / "daphne.log", {**env, "SWITCHYARD_CELERY_QUEUE": worker.queue}
        )
        try:
            yield {**release_world, "url": url, "tmp": tmp_path, "worker": worker}
        finally:
            stop_process(proc)
    finally:
        worker.stop()
        for key in env:
            os.environ.pop(key, None)


def switchyard(
    world, *args: str, user: str = "rita", token: str | None = None, extra_env: dict | None = None
):
    """Run the CLI as a CI job would (`user`'s config file, `extra_env` added to the
    environment); answer (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHYARD_", "DJANGO_"))}
    env.update(SWITCHYARD_URL=world["url"], SWITCHYARD_CONFIG=str(world["tmp"] / f"{user}.toml"))
    env.update(extra_env or {})
    if token:
        env["SWITCHYARD_TOKEN"] = token
    done = subprocess.run(
        [sys.executable, "-m", "switchyard_cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return done.returncode, done.stdout, done.stderr


def login(world, user: str) -> None:
    code, out, err = switchyard(
        world, "login", "--username", user, "--password", f"pw-{user}", user=user
    )
    assert code == 0, (out, err)
    assert oct((world["tmp"] / f"{user}.toml").stat().st_mode & 0o777) == "0o600"


def register(world, folder: int, label: str, *extra: str) -> dict:
    code, out, err = switchyard(
        world,
        *["model", "register", RISK_SCORE, "--model", "risk_score", "--label", label],
        *["--folder", str(folder), "--wait", "--timeout", "120", "-o", "json", *extra],
        user="ada",
    )
    assert code == 0, (out, err)
    return json.loads(out)


def release(world, version: int, steps: str, analysis: dict):
    return switchyard(
        world,
        *["release", "start", f"risk_score:{version}", "--cluster", "canary", "--steps", steps],
        *["--interval", "2", "--analysis", json.dumps(analysis), "-o", "json"],
    )


def release_state(world, release_id: int, state: str, timeout_s: float = 60) -> None:
    """Wait (through `release status -o json`) until the release is in `state`."""
    deadline, seen = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        code, out, err = switchyard(world, "release", "status", str(release_id), "-o", "json")
        assert code == 0, (out, err)
        seen = json.loads(out)["state"]
        if seen == state:
            return
        time.sleep(0.3)
    raise AssertionError(f"release {release_id} is {seen}, not {state}")


def test_ci_flow_register_deploy_canary_promoted_then_faulty_rolled_back(stack):
    world = stack
    login(world, "ada")
    login(world, "rita")
    # Register (creating the model for its team), each version waited for until smoke passed.
    v1 = register(world, 1, "build-1", "--team", "fraud")
    assert (v1["version"], v1.get("status"), v1.get("cli_outcome")) == (
        1,
        "smoke_passed",
        "succeeded",
    ), v1
    code, out, err = switchyard(world, "version", "wait", "risk_score:1", "-o", "json")
    assert code == 0 and json.loads(out)["status"] == "smoke_passed", (out, err)
    assert register(world, 2, "build-2")["version"] == 2
    assert register(world, 3, "build-3")["version"] == 3
    code, out, err = switchyard(world, "deploy", "risk_score:1", "--cluster", "canary", "--wait")
    assert code == 0 and "succeeded" in out, (out, err)
    routing.router_for(world["cluster"]).apply(routing.router_state(world["cluster"], []))
    staging = cluster_create(actor=world["rita"], name="stage", environment="staging")
    node = world["nodes"][0]
    node_create(
        cluster=staging,
        actor=world["rita"],
        name="s1",
        http_url=node.http_url,
        grpc_url=node.grpc_url,
        metrics_url=node.metrics_url,
    )
    code, out, err = switchyard(
        world,
        *["benchmark", "run", "risk_score:1", "--cluster", "stage", "--concurrency", "1,2"],
        *["--duration", "1", "--wait", "--timeout", "120", "-o", "json"],
        user="ada",
    )
    bench = json.loads(out)
    assert bench.get("status") == "succeeded" and len(bench["levels"]) == 2, (out, err)
    assert code == (0 if bench["verdict"].get("passed") is not False else 1)

    beat = Ticking(Lanes.of(world["worker"]))
    beat.start()
    try:
        with Traffic(world["port"], "risk_score") as traffic:
            traffic.more(20)  # traffic flows
            good = {"min_requests": 10, "max_failed_checks": 2, "latency_tolerance": 5}
            code, out, err = release(world, 2, "20,50,100", good)
            assert code == 0, (out, err)
            release_id = json.loads(out)["id"]
            # A wait that runs out is exit 3; waiting long enough sees it promoted (exit 0).
            code, out, _ = switchyard(
                world, "release", "status", str(release_id), "--wait", "--timeout", "1"
            )
            assert code == 3 and "timed out" in out, out
            # A human pauses and resumes it from the command line.
            release_state(world, release_id, "progressing")
            assert switchyard(world, "release", "pause", str(release_id))[0] == 0
            release_state(world, release_id, "paused")
            assert switchyard(world, "release", "resume", str(release_id))[0] == 0
            code, out, err = switchyard(
                world, "release", "status", str(release_id), "--wait", "--timeout", "150"
            )
            assert code == 0 and "SUCCEEDED".lower() in out.lower(), (out, err)
            assert _loaded(world, "risk_score") == [{"2"}, {"2"}]

            faulty = {"min_requests": 10, "max_failed_checks": 1}
            code, out, err = release(world, 3, "25,50,100", faulty)
            assert code == 0, (out, err)
            release_id = json.loads(out)["id"]
            code, out, err = switchyard(
                world, "release", "status", str(release_id), "--wait", "-o", "json"
            )
            assert code == 1, (out, err)
            answer = json.loads(out)
            assert (answer["state"], answer["cli_outcome"]) == ("rolled_back", "rolled_back")
            # An action that does not fit the state: the API's 409, exit 2.
            code, out, err = switchyard(world, "release", "promote", str(release_id))
            assert code == 2 and "HTTP 409" in err, (out, err)
    finally:
        beat.stop()
    assert _loaded(world, "risk_score") == [{"2"}, {"2"}]
    _unload(world, Model.objects.get(name="risk_score"))


def test_bad_token_and_unknown_resources_exit_2(stack):
    world = stack
    code, out, err = switchyard(world, "release", "status", "1", "-o", "json", token="nope")
    assert code == 2 and err.startswith("switchyard: HTTP 401"), (out, err)
    assert json.loads(out)["http_status"] == 401
    login(world, "rita")
    code, out, err = switchyard(world, "deploy", "nope:1", "--cluster", "canary", "--wait")
    assert code == 2 and "HTTP 4" in err, (out, err)
    code, out, err = switchyard(
        world, "cost", "report", "--group-by", "team", "--format", "csv", user="rita"
    )
    assert code == 0 and out.strip() == "", (out, err)  # no usage recorded: no rows
    code, out, err = switchyard(world, "cost", "report", "--group-by", "team", "-o", "json")
    assert code == 0 and json.loads(out)["rows"] == [], (out, err)
    code, out, err = switchyard(world, "cost", "report", "--kind", "validation", "-o", "json")
    assert code == 0 and json.loads(out)["total_cost"] == 0, (out, err)
    code, out, err = switchyard(world, "login", "--username", "rita", "--password", "wrong")
    assert code == 2 and "HTTP 40" in err, (out, err)


def docs_ci_script(tmp_path) -> tuple[str, dict]:
    """The CI example of docs/CLI.md as a file, and a PATH whose `switchyard` is this CLI."""
    text = (ROOT / "docs" / "CLI.md").read_text()
    script = tmp_path / "ci.sh"
    script.write_text(re.search(r"```bash\n(.*?)```", text, re.S).group(1))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "switchyard"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m switchyard_cli "$@"\n')
    shim.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return str(script), {"PATH": path, "PYTHONPATH": str(ROOT)}


def run_ci_script(world, script: str, env: dict, **inputs: str):
    env = {**env, "SWITCHYARD_URL": world["url"], "MODEL": "risk_score", "TEAM": "fraud"}
    env.update(CLUSTER="canary", MODEL_DIR=RISK_SCORE, HOME=str(world["tmp"]), **inputs)
    env["SWITCHYARD_TOKEN"] = tomllib.loads((world["tmp"] / "ci.toml").read_text())["token"]
    work = world["tmp"] / inputs["BUILD"]
    work.mkdir()
    return subprocess.run(
        ["bash", script], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )


def switchyard_on_a_terminal(world, *args: str, user: str) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal; answer (code, stdout, terminal text)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHYARD_", "DJANGO_"))}
    env.update(SWITCHYARD_URL=world["url"], SWITCHYARD_CONFIG=str(world["tmp"] / f"{user}.toml"))
    env.update(TERM="xterm-256color", COLUMNS="120")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "switchyard_cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = proc.stdout.read()
    return proc.wait(timeout=60), out, b"".join(chunks).decode(errors="replace")


def test_upload_shows_a_progress_bar_on_a_terminal_only(stack):
    world = stack
    login(world, "ada")
    register_args = ["model", "register", RISK_SCORE, "--model", "risk_score", "--folder", "1"]
    code, out, terminal = switchyard_on_a_terminal(
        world, *register_args, "--label", "b1", "--team", "fraud", user="ada"
    )
    assert code == 0 and "uploading" in terminal and "version risk_score:1" in out, (
        out,
        terminal,
    )
    code, out, err = switchyard(world, *register_args, "--label", "b2", user="ada")
    # Without a terminal nothing but the answer: no bar, no escape sequences. (Same digest:
    # the server may refuse it with 409 naming version 1, or register it as version 2.)
    assert "uploading" not in err and "\x1b[" not in out + err, (out, err)
    assert (code, out.strip()) in {(0, "version risk_score:2: registered"), (2, "")}, (out, err)


def test_a_version_derived_with_a_config_patch_passes_its_smoke_test_on_triton(stack):
    world = stack
    login(world, "ada")
    first = register(world, 1, "base", "--team", "fraud")
    patch = {"dynamic_batching": {"max_queue_delay_microseconds": 3000}}
    code, out, err = switchyard(
        world,
        *["version", "derive", f"risk_score:{first['version']}", "--patch", json.dumps(patch)],
        *["--label", "slow-batching", "--wait", "--timeout", "120", "-o", "json"],
        user="ada",
    )
    assert code == 0, (out, err)
    derived = json.loads(out)
    assert derived["cli_outcome"] == "succeeded" and derived["label"] == "slow-batching"
    assert derived["derived_from"] == first["version"]
    # The smoke test loaded the derived config on the smoke node (the worker's real path).
    assert derived["validation"]["smoke"]["passed"] is True, derived["validation"]
    stored = ModelVersion.objects.get(model__name="risk_score", version=derived["version"])
    assert stored.config_json["dynamic_batching"]["max_queue_delay_microseconds"] == "3000"

    config = world["tmp"] / "config.pbtxt"
    too_big = "preferred_batch_size: 128"  # above max_batch_size: Triton's rules refuse it
    config.write_text(stored.config_text.replace("max_queue_delay_microseconds: 3000", too_big))
    code, out, err = switchyard(
        world,
        "version",
        "derive",
        f"risk_score:{derived['version']}",
        "--config",
        str(config),
        user="ada",
    )
    assert code == 2 and "HTTP 400" in err and "preferred_batch_size 128" in err, (out, err)
    code, out, err = switchyard(world, "version", "derive", "risk_score:1", user="ada")
    assert code == 2 and "either --patch or --config" in err, (out, err)
