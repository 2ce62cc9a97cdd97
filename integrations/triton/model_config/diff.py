"""Where two versions' configs differ in what Triton makes them share.

Triton serves every loaded version of a model under one config, the one it was last loaded
with (Switchyard loads the newest version's, deployments/push.py), so while a release serves
baseline and candidate together the older of the two runs under the other's batching,
instances, parameters and inputs. `config_differences` says where that would change anything.

Plain Python. Configs are compared as parsed by Triton's schema (ModelConfig), never as text:
comments, whitespace, field order in the file and spellings of one value (`dims: 4` or
`dims: [ 4 ]`, an enum by name or number) never count. A field left out and the same field
set to its proto default are the same for scalars (`max_batch_size: 0`); a message that is
present but empty (`dynamic_batching { }`) is not absent, since its presence switches the
feature on. What is per version, or Switchyard's own, is left out (IGNORED). Entries of
`input`, `output` and any other list whose items all carry distinct names are matched by
name, so their order counts only as the order itself (some backends, e.g. PyTorch's, bind
inputs by position).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from tritonclient.grpc.model_config_pb2 import ModelConfig

# path -> why a difference there does not matter for serving both versions at once
IGNORED: dict[str, str] = {
    "name": "the model's name: every version is loaded under it",
    "version_policy": "replaced at every load by the versions to serve",
    "parameters.PUSH_ID": "Switchyard's own marker, set at every load",
}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _Map(dict):
    """A map field's value (parameters, metric_tags, ...), unlike a message's fields."""


@dataclass(frozen=True)
class ConfigDifference:
    """One field whose value differs; None where a config does not set it."""

    path: str  # e.g. "max_batch_size", "input[FEATURES].dims", "instance_group[0].count"
    baseline: Any
    candidate: Any

    @property
    def baseline_text(self) -> str:
        return value_text(self.baseline)

    @property
    def candidate_text(self) -> str:
        return value_text(self.candidate)


def config_differences(baseline: Mapping, candidate: Mapping) -> list[ConfigDifference]:
    """Every field, outside IGNORED, whose parsed value differs between the two stored
    configs (ModelConfig as protobuf JSON), in the schema's field order; [] when they serve
    alike. ValueError when either is not a ModelConfig."""
    out: list[ConfigDifference] = []
    _diff("", shared_fields(baseline), shared_fields(candidate), out)
    return out


def shared_fields(config: Mapping) -> dict:
    """The config's set fields as plain values (enums by name), IGNORED paths removed."""
    if not isinstance(config, Mapping):
        raise ValueError(f"not a model config: {type(config).__name__}")
    message = ModelConfig()
    try:
        json_format.ParseDict(config, message)
    except (json_format.ParseError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a model config: {exc}") from None
    plain = _plain(message)
    for path in IGNORED:
        *parents, last = path.split(".")
        node = plain
        for key in parents:
            node = node.get(key, {})
        node.pop(last, None)
    return plain


def value_text(value: Any) -> str:
    """A value as a person reads it in a table: "(not set)", a word, or compact JSON."""
    if value is None:
        return "(not set)"
    if isinstance(value, str):
        return value or '""'
    return json.dumps(value, separators=(", ", ": "))


def _plain(message: Message) -> dict:
    """The message's set fields in field-number order as dicts, lists and scalars; maps
    always (an empty map and none are the same, and a key one side adds is then named by
    its path)."""
    present = {field.name: value for field, value in message.ListFields()}
    out: dict[str, Any] = {}
    for field in sorted(message.DESCRIPTOR.fields, key=lambda f: f.number):
        value = present.get(field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            items = (value or {}).items()
            out[field.name] = _Map({key: _one(value_field, item) for key, item in items})
        elif field.name not in present:
            continue
        elif field.is_repeated:
            out[field.name] = [_one(field, item) for item in value]
        else:
            out[field.name] = _one(field, value)
    return out


def _one(field, value: Any) -> Any:
    if field.message_type is not None:
        if field.message_type.full_name == "inference.ModelParameter":
            return value.string_value  # its only field: show the string itself
        return _plain(value)
    if field.enum_type is not None:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    return value


def _diff(path: str, baseline: Any, candidate: Any, out: list[ConfigDifference]) -> None:
    if baseline == candidate:
        return
    if isinstance(baseline, dict) and isinstance(candidate, dict):
        for key in [*baseline, *(k for k in candidate if k not in baseline)]:
            _diff(_key_path(path, key), baseline.get(key), candidate.get(key), out)
    elif _names(baseline) is not None and _names(candidate) is not None:
        _diff_named(path, baseline, candidate, out)
    elif _messages(baseline, candidate) and len(baseline) == len(candidate):
        for index, (one, other) in enumerate(zip(baseline, candidate, strict=True)):
            _diff(f"{path}[{index}]", one, other, out)
    else:
        out.append(ConfigDifference(path, _shown(baseline), _shown(candidate)))


def _diff_named(path: str, baseline: list, candidate: list, out: list) -> None:
    """Items matched by name; a different order of the names both have is its own entry."""
    before, after = _names(baseline), _names(candidate)
    common = [n for n in before if n in after]
    if common != [n for n in after if n in before]:
        out.append(ConfigDifference(f"{path} (order)", before, after))
    by_name = {item["name"]: item for item in baseline}, {item["name"]: item for item in candidate}
    for name in [*before, *(n for n in after if n not in before)]:
        _diff(f"{path}[{name}]", by_name[0].get(name), by_name[1].get(name), out)


def _names(items: Any) -> list[str] | None:
    """The items' names when each is a message with a distinct, non-empty name; else None."""
    if not isinstance(items, list) or not items or not _messages(items):
        return None
    names = [item.get("name") for item in items]
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        return None
    return names


def _shown(value: Any) -> Any:
    """`value` as plain data without the empty maps _plain adds (a whole message reads as
    written)."""
    if isinstance(value, list):
        return [_shown(item) for item in value]
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items() if not (isinstance(v, _Map) and not v)}
    return value


def _messages(*lists: Any) -> bool:
    return all(isinstance(x, list) and all(isinstance(i, dict) for i in x) for x in lists)


def _key_path(path: str, key: Any) -> str:
    """A field as `a.b`, a map key as `a["k.x"]` or `a[3]` when it is no plain name."""
    if isinstance(key, str) and _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"
