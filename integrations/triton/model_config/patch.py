"""A config.pbtxt changed by a patch of top-level fields (plain Python, no Django).

A patch is a JSON object whose keys are ModelConfig's top-level fields as config.pbtxt names
them (`max_batch_size`, `dynamic_batching`, `instance_group`, ...): each value replaces the
field whole (a list replaces the whole repeated field, a message the whole message), `null`
removes it. The model's `name` stays the model's. The answer is the config written back by
protobuf's text format, so the original text's comments and layout are not kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format, text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig

FIXED_FIELDS = frozenset({"name"})


class PatchError(ValueError):
    """A patch that can't apply; `field` names the top-level field it is about, if one."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


def config_patched(text: str, patch: Mapping[str, Any]) -> str:
    """`text` with each field of `patch` set (or removed for None), as config.pbtxt text."""
    config = ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise PatchError(f"the source config does not parse: {exc}") from None
    if not patch:
        raise PatchError("the patch changes no field: give at least one")
    known = ModelConfig.DESCRIPTOR.fields_by_name
    for key, value in patch.items():
        if key not in known:
            raise PatchError(
                f"'{key}' is not a field of Triton's ModelConfig; check its spelling",
                field=key,
            )
        if key in FIXED_FIELDS:
            raise PatchError(f"'{key}' can't be patched: a version keeps its model's", field=key)
        config.ClearField(key)
        if value is None:
            continue
        part = ModelConfig()
        try:
            json_format.ParseDict({key: value}, part)
        except json_format.ParseError as exc:
            raise PatchError(f"'{key}': {_readable(str(exc))}", field=key) from None
        config.MergeFrom(part)
    return text_format.MessageToString(config)


def _readable(detail: str) -> str:
    """protobuf's ParseDict messages name the path from the message type; drop the type."""
    return detail.replace("Failed to parse ", "").replace("inference.ModelConfig.", "").rstrip(".")
