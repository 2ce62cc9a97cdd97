"""The issues a config check finds, and how they are collected and located."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from tritonclient.grpc.model_config_pb2 import ModelConfig

CONFIG_FILE = "config.pbtxt"


@dataclass(frozen=True)
class ConfigIssue:
    """One problem found in a config, located where possible."""

    severity: str  # "error" | "warning"
    message: str
    file: str = CONFIG_FILE
    line: int | None = None
    column: int | None = None
    field: str | None = None

    def as_dict(self) -> dict:
        """The issue as a JSON-ready dict."""
        return asdict(self)


@dataclass
class ConfigReport:
    """The parsed config (None when it did not parse) and every issue found."""

    config: ModelConfig | None
    issues: list[ConfigIssue]

    @property
    def errors(self) -> list[ConfigIssue]:
        return [issue for issue in self.issues if issue.severity == "error"]

    @property
    def warnings(self) -> list[ConfigIssue]:
        return [issue for issue in self.issues if issue.severity == "warning"]

    @property
    def is_valid(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        """`{"valid": bool, "errors": [...], "warnings": [...]}`, JSON-ready."""
        return {
            "valid": self.is_valid,
            "errors": [issue.as_dict() for issue in self.errors],
            "warnings": [issue.as_dict() for issue in self.warnings],
        }


class Checker:
    """Collects issues for one config text; finds lines by a simple search of the text."""

    def __init__(self, text: str, *, max_elements: int | None = None) -> None:
        self.lines = text.splitlines()
        self.issues: list[ConfigIssue] = []
        # Elements per tensor item the control plane may build requests of (None: default).
        self.max_elements = max_elements

    def line_of(self, pattern: str) -> int | None:
        regex = re.compile(pattern)
        for number, line in enumerate(self.lines, start=1):
            if regex.search(line.split("#", 1)[0]):
                return number
        return None

    def field_line(self, name: str) -> int | None:
        """The line of `name:` / `name {` / `name [`, preferring one that starts a line."""
        field = rf"{re.escape(name)}\s*[:{{\[<]"
        return self.line_of(rf"^{field}") or self.line_of(rf"(?<![\w.]){field}")

    def tensor_line(self, name: str) -> int | None:
        return self.line_of(rf"""name\s*:\s*["']{re.escape(name)}["']""")

    def add(self, severity: str, message: str, field: str | None, line: int | None) -> None:
        self.issues.append(ConfigIssue(severity, message, line=line, field=field))

    def error(self, message: str, *, field: str | None = None, line: int | None = None) -> None:
        self.add("error", message, field, line)

    def warning(self, message: str, *, field: str | None = None, line: int | None = None) -> None:
        self.add("warning", message, field, line)
