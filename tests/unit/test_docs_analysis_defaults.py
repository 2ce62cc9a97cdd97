"""docs/CLI.md's table of analysis defaults is what releases/inputs.py uses."""

import re
from dataclasses import asdict
from pathlib import Path

from releases.inputs import AnalysisSettings

ROOT = Path(__file__).resolve().parents[2]


def test_every_analysis_default_is_in_the_cli_docs_with_its_value():
    text = (ROOT / "docs" / "CLI.md").read_text()
    table = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", text, re.M))
    defaults = asdict(AnalysisSettings())
    assert set(defaults) <= set(table), set(defaults) - set(table)
    for key, value in defaults.items():
        shown = table[key]
        expected = "the step interval" if value is None else str(value)
        assert shown == expected, (key, shown, expected)


def test_the_api_description_lists_every_analysis_default_with_its_value():
    text = " ".join((ROOT / "controlplane" / "api_description.md").read_text().split())
    for key, value in asdict(AnalysisSettings()).items():
        if value is not None:  # interval_s: the step interval, said in words
            assert f"`{key}` {value}" in text, key
