"""docs/CLI.md's GitHub Actions and GitLab CI jobs are valid YAML that run the page's own
script (the one tests/cli/test_cli_flow.py runs against the real stack) with what it reads."""

import re
from pathlib import Path

import yaml

DOC = (Path(__file__).resolve().parents[2] / "docs" / "CLI.md").read_text()
SCRIPT = "bash ci/switchyard-release.sh"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, re.S)


def test_the_page_names_its_script_and_both_ci_jobs_run_it():
    assert "Save it as `ci/switchyard-release.sh`" in DOC
    github, gitlab = (yaml.safe_load(text) for text in _blocks("yaml"))
    steps = github["jobs"]["release"]["steps"]
    run = next(step for step in steps if step.get("run") == SCRIPT)
    assert {"SWITCHYARD_URL", "SWITCHYARD_TOKEN", "BUILD", "MODEL_DIR"} <= set(run["env"])
    assert SCRIPT in gitlab["release"]["script"]
    assert {"BUILD", "MODEL_DIR"} <= set(gitlab["release"]["variables"])


def test_the_script_reads_the_variables_the_jobs_set():
    (script,) = _blocks("bash")
    for name in ("MODEL_DIR", "BUILD"):
        assert f"{name}=" in script, name
