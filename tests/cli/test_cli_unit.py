"""The CLI's pure parts: MODEL:VERSION, outcomes and exit codes, the config file, archives,
the console-script entry point."""

import importlib
import io
import os
import stat
import tarfile
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
    "kind,payload,outcome",
    [
        ("version", {"status": "registered"}, None),
        ("version", {"status": "smoke_passed"}, "succeeded"),
        ("version", {"status": "smoke_failed"}, "failed"),
        ("deployment", {"status": "running"}, None),
        ("deployment", {"status": "failed"}, "failed"),
        ("benchmark", {"status": "succeeded", "verdict": {"passed": True}}, "succeeded"),
        ("benchmark", {"status": "succeeded", "verdict": {"passed": False}}, "failed"),
        ("release", {"state": "PROGRESSING"}, None),
        ("release", {"state": "SUCCEEDED"}, "succeeded"),
        ("release", {"state": "ROLLED_BACK"}, "rolled_back"),
        ("release", {"state": "rolled_back"}, "rolled_back"),
        # The server's own vocabulary wins when it answers one.
        ("release", {"state": "x", "finished": True, "outcome": "cancelled"}, "cancelled"),
        ("deployment", {"status": "succeeded", "finished": False, "outcome": None}, None),
    ],
)
def test_outcome_of_each_resource(kind, payload, outcome):
    assert outcome_of(kind, payload) == outcome


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
