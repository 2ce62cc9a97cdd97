"""Parse and check a Triton `config.pbtxt` with Triton's own ModelConfig schema.

Plain Python, no Django. The registry calls `validate_model_config` when a model version is
uploaded: errors block registration, warnings are stored and shown. The checks target the
mistakes that docs/TRITON.md §config shows the live 2.51 server reports late, never (a python
version folder without model.py hangs the load forever) or silently (no config: no inputs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2
from tritonclient.grpc.model_config_pb2 import ModelConfig

from .checks import NEWER_FIELDS, run_checks
from .diff import ConfigDifference, config_differences
from .report import CONFIG_FILE, Checker, ConfigIssue, ConfigReport
from .untrusted import (
    DEFAULT_ALLOWED_BACKENDS,
    backend_of,
    check_untrusted,
    library_issues,
    python_calls_issues,
    python_model_issues,
)
from .warmup import WARMUP_FOLDER, add_native_warmup, native_warmup_skip_reason

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_ALLOWED_BACKENDS",
    "backend_of",
    "library_issues",
    "python_calls_issues",
    "python_model_issues",
    "WARMUP_FOLDER",
    "add_native_warmup",
    "NEWER_FIELDS",
    "ConfigDifference",
    "ConfigIssue",
    "ConfigReport",
    "config_differences",
    "config_for_serving",
    "config_to_dict",
    "native_warmup_skip_reason",
    "validate_model_config",
]


def validate_model_config(
    text: str,
    *,
    model_name: str,
    version_files: Iterable[str],
    known_models: Iterable[str] = (),
    server_version: str = "2.51.0",
    max_elements: int | None = None,
    allowed_backends: Iterable[str] = DEFAULT_ALLOWED_BACKENDS,
    custom_backends: Iterable[str] = (),
) -> ConfigReport:
    """Parse `text` as a ModelConfig and report every error and warning for this upload.

    `max_elements`: the most elements per tensor item the control plane builds warm-up and
    smoke requests of (SWITCHYARD_MAX_TENSOR_ELEMENTS; None: the built-in default).
    `allowed_backends` (SWITCHYARD_ALLOWED_BACKENDS) and `custom_backends` (those some
    cluster allows explicitly): any other backend or platform is refused."""
    if not text or not text.strip():
        message = (
            "config.pbtxt is missing or empty; add one with name, backend, input and output "
            "(a python model without a config loads with no inputs or outputs)."
        )
        return ConfigReport(None, [ConfigIssue("error", message)])
    config = ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        return ConfigReport(None, [_parse_issue(exc, text)])
    checker = Checker(text, max_elements=max_elements)
    run_checks(
        checker,
        config,
        model_name=model_name,
        files={_normalise(path) for path in version_files},
        known_models=set(known_models),
        server_version=server_version,
    )
    check_untrusted(checker, config, allowed=set(allowed_backends), custom=set(custom_backends))
    return ConfigReport(config, checker.issues)


def _parse_issue(exc: text_format.ParseError, text: str) -> ConfigIssue:
    """A readable issue from protobuf's "line:col : message" ParseError."""
    line, column = exc.GetLine(), exc.GetColumn()
    detail = re.sub(r"^\d+:\d+ : ", "", str(exc))
    lines = text.splitlines()
    if line and 0 < line <= len(lines):
        quoted = f"'{lines[line - 1]}': "
        detail = detail.removeprefix(quoted)
    return ConfigIssue("error", _readable(detail), line=line, column=column)


def _readable(detail: str) -> str:
    """Reword protobuf's parser messages for a person editing config.pbtxt."""
    if match := re.search(r'Message type "inference\.([\w.]+)" has no field named "(\w+)"', detail):
        owner, name = match.groups()
        return f"unknown field '{name}' in {owner}; check its spelling against Triton's schema."
    if match := re.search(r'Enum type "inference\.([\w.]+)" has no value named (\w+)', detail):
        enum_name, value = match.groups()
        enum = model_config_pb2.DESCRIPTOR.pool.FindEnumTypeByName(f"inference.{enum_name}")
        names = [v.name for v in enum.values]
        hint = f"; did you mean {value_hint}?" if (value_hint := _enum_hint(value, names)) else ""
        return f"'{value}' is not a valid {enum_name}{hint} (valid: {', '.join(names)})."
    return f"syntax error: {detail.rstrip('.')}."


def _enum_hint(value: str, names: list[str]) -> str | None:
    for prefix in ("TYPE_", "KIND_", "FORMAT_"):
        if f"{prefix}{value.upper()}" in names:
            return f"{prefix}{value.upper()}"
    return None


def _normalise(path: str) -> str:
    return path.replace("\\", "/").removeprefix("./").strip("/")


def config_to_dict(config: ModelConfig) -> dict:
    """The config as a JSON-ready dict with the proto's field names (for storing)."""
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def config_for_serving(
    config: ModelConfig, *, versions: list[int], push_id: str | None = None
) -> str:
    """A copy of `config` serving exactly `versions`, as the JSON Triton's load API takes."""
    if not config.name:
        raise ValueError("the config has no name")
    if not versions or any(v <= 0 for v in versions):
        raise ValueError(f"versions must be positive integers, got {versions}")
    serving = ModelConfig()
    serving.CopyFrom(config)
    serving.version_policy.Clear()
    serving.version_policy.specific.versions.extend(sorted(set(versions)))
    if push_id is not None:
        serving.parameters["PUSH_ID"].string_value = push_id
    return json_format.MessageToJson(serving, preserving_proto_field_name=True, indent=None)
