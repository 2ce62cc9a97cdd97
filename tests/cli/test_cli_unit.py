"""The CLI's pure parts: MODEL:VERSION, outcomes and exit codes, the config file, archives,
the console-script entry point."""

import http.server
import importlib
import io
import json
import os
import socket
import stat
import tarfile
import threading
import tomllib

import click
import pytest
from click.testing import CliRunner

from switchyard_cli import client as cli_client
from switchyard_cli.main import archive_of, cli
from switchyard_cli.outcome import exit_code, outcome_of
from tests.conftest import ROOT
from tests.exampledata import EXAMPLES


def test_pyproject_installs_the_switchyard_console_script():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["scripts"]["switchyard"]
    module, _, name = target.partition(":")
    assert getattr(importlib.import_module(module), name) is cli
    assert project["tool"]["setuptools"]["packages"] == ["switchyard_cli"]
    assert "-e ." in (ROOT / "Makefile").read_text()


@pytest.mark.parametrize(
    "payload,outcome",
    [
        ({"state": "pending", "finished": False, "outcome": None}, None),
        ({"state": "succeeded", "finished": True, "outcome": "succeeded"}, "succeeded"),
        ({"state": "succeeded", "finished": True, "outcome": "failed"}, "failed"),  # verdict
        ({"state": "rolled_back", "finished": True, "outcome": "rolled_back"}, "rolled_back"),
        ({"state": "cancelled", "finished": True, "outcome": "cancelled"}, "cancelled"),
        ({"state": "running"}, None),  # no vocabulary: never taken as finished
    ],
)
def test_outcome_is_the_servers_finished_and_outcome(payload, outcome):
    assert outcome_of(payload) == outcome


def test_exit_codes_a_ci_job_can_branch_on():
    assert [exit_code(o) for o in ("succeeded", "failed", "rolled_back", "cancelled", None)] == [
        0,
        1,
        1,
        1,
        3,
    ]


@pytest.mark.parametrize("bad", ["risk_score", "risk_score:", ":3", "risk_score:v3"])
def test_a_target_that_is_not_model_version_is_a_usage_error(bad, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_TOKEN", "unused")
    result = CliRunner().invoke(cli, ["deploy", bad, "--cluster", "c"])
    assert result.exit_code == 2 and "MODEL:VERSION" in result.output


def test_no_token_is_exit_2_naming_the_fix(monkeypatch, tmp_path):
    monkeypatch.delenv("SWITCHYARD_TOKEN", raising=False)
    monkeypatch.setenv("SWITCHYARD_CONFIG", str(tmp_path / "none.toml"))
    result = CliRunner().invoke(cli, ["release", "status", "1"])
    assert result.exit_code == 2 and "switchyard login" in result.output


def test_config_file_is_private_and_the_environment_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("SWITCHYARD_CONFIG", str(tmp_path / "sy" / "config.toml"))
    monkeypatch.delenv("SWITCHYARD_TOKEN", raising=False)
    monkeypatch.delenv("SWITCHYARD_URL", raising=False)
    path = cli_client.write_config("http://127.0.0.1:9/", 'tok"en')
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert cli_client.settings() == ("http://127.0.0.1:9", 'tok"en')
    monkeypatch.setenv("SWITCHYARD_TOKEN", "from-env")
    monkeypatch.setenv("SWITCHYARD_URL", "http://127.0.0.1:8")
    assert cli_client.settings() == ("http://127.0.0.1:8", "from-env")


def test_archive_holds_config_and_only_the_chosen_version_folder():
    data = archive_of(EXAMPLES / "risk_score", 3)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = tar.getnames()
    assert "config.pbtxt" in names
    assert {n.split("/")[0] for n in names if "/" in n} == {"3"}
    assert not any("__pycache__" in n for n in names)


def test_int_lists_refuse_words():
    from switchyard_cli.common import int_list

    assert int_list("5,25, 50,100") == [5, 25, 50, 100]
    with pytest.raises(click.BadParameter):
        int_list("5,x")


def test_idempotency_key_is_stable_per_job_and_target(monkeypatch):
    from switchyard_cli.common import idempotency_key

    monkeypatch.delenv("SWITCHYARD_IDEMPOTENCY_KEY", raising=False)
    deploy = {"model": "risk_score", "version": 3, "cluster": "prod"}
    assert idempotency_key("/api/v1/deployments/", deploy) != idempotency_key(
        "/api/v1/deployments/", deploy
    )
    monkeypatch.setenv("SWITCHYARD_IDEMPOTENCY_KEY", "job-42")
    key = idempotency_key("/api/v1/deployments/", deploy)
    assert (
        key == idempotency_key("/api/v1/deployments/", deploy) == "job-42:deployments:risk_score:3"
    )
    release = {"model": "risk_score", "candidate_version": 3}
    assert idempotency_key("/api/v1/releases/", release) == "job-42:releases:risk_score:3"


class _Flaky(http.server.BaseHTTPRequestHandler):
    """A real HTTP server that fails the first `failures` requests (503, or a dropped
    connection), then answers 201 with the number of requests it saw."""

    seen: list = []
    failures = 2
    mode = "503"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.seen.append((self.command, self.headers.get("Idempotency-Key")))
        if len(self.seen) <= self.failures:
            if self.mode == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps({"requests": len(self.seen)}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def flaky():
    _Flaky.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("mode", ["503", "drop"])
def test_a_post_with_an_idempotency_key_is_retried_after_5xx_or_a_dropped_connection(flaky, mode):
    _Flaky.mode = mode
    api = cli_client.Client(f"http://127.0.0.1:{flaky.server_port}", "t", retry_pauses_s=(0, 0, 0))
    answer = api.request("POST", "/x/", body={"a": 1}, headers={"Idempotency-Key": "k1"})
    assert answer == {"requests": 3}
    assert _Flaky.seen == [("POST", "k1")] * 3  # the same key every time: the server replays


def test_a_post_without_a_key_is_sent_once(flaky):
    _Flaky.mode = "503"
    api = cli_client.Client(f"http://127.0.0.1:{flaky.server_port}", "t", retry_pauses_s=(0, 0, 0))
    with pytest.raises(cli_client.ApiError) as failed:
        api.request("POST", "/x/", body={"a": 1})
    assert failed.value.status == 503 and len(_Flaky.seen) == 1


def test_retries_stop_after_the_last_pause(flaky):
    _Flaky.mode, _Flaky.failures = "503", 5
    try:
        api = cli_client.Client(f"http://127.0.0.1:{flaky.server_port}", "t", retry_pauses_s=(0,))
        with pytest.raises(cli_client.ApiError) as failed:
            api.request("GET", "/x/")
    finally:
        _Flaky.failures = 2
    assert failed.value.status == 503 and len(_Flaky.seen) == 2


def test_a_register_upload_carries_an_idempotency_key_and_is_retried(flaky):
    _Flaky.mode = "drop"
    api = cli_client.Client(f"http://127.0.0.1:{flaky.server_port}", "t", retry_pauses_s=(0, 0, 0))
    answer = api.upload("/v/", {"label": "b1"}, "b1.tar.gz", b"x" * 10, lambda *a: None, "job:v")
    assert answer == {"requests": 3} and _Flaky.seen == [("POST", "job:v")] * 3


class _Releases(http.server.BaseHTTPRequestHandler):
    """A real HTTP server answering POST /api/v1/releases/ as the API does about unrouted
    traffic: 409 unless the body confirms it, then 201. It keeps the bodies it got."""

    bodies: list = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.bodies.append(body)
        confirmed = body.get("confirm_unrouted") is True
        answer = (
            {"id": 7, "state": "pending", "finished": False, "outcome": None}
            if confirmed
            else {"errors": [{"field": "confirm_unrouted", "message": "40% unrouted"}]}
        )
        data = json.dumps(answer).encode()
        self.send_response(201 if confirmed else 409)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_release_start_sends_confirm_unrouted_only_when_asked(monkeypatch, tmp_path):
    _Releases.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Releases)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SWITCHYARD_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("SWITCHYARD_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("SWITCHYARD_TOKEN", "t")
    try:
        start = ["release", "start", "risk_score:2", "--cluster", "prod"]
        refused = CliRunner().invoke(cli, start)
        shadow = ["--shadow", "30", "--shadow-share", "20"]
        confirmed = CliRunner().invoke(cli, [*start, "--confirm-unrouted", *shadow])
    finally:
        server.shutdown()
        server.server_close()
    assert refused.exit_code == 2 and "40% unrouted" in refused.output
    assert confirmed.exit_code == 0, confirmed.output
    assert ["confirm_unrouted" in b for b in _Releases.bodies] == [False, True]
    assert "shadow_s" not in _Releases.bodies[0]  # the API's default: no shadow
    assert (_Releases.bodies[1]["shadow_s"], _Releases.bodies[1]["shadow_share"]) == (30, 20)


def test_a_stream_body_that_is_not_json_is_a_usage_error(monkeypatch, tmp_path):
    monkeypatch.setenv("SWITCHYARD_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("SWITCHYARD_TOKEN", "unused")
    run = ["benchmark", "run", "gen:1", "--cluster", "c", "--stream-body", "{PROMPT: hi}"]
    result = CliRunner().invoke(cli, run)
    assert result.exit_code == 2, result.output
    assert "--stream-body" in result.output and "not JSON" in result.output
