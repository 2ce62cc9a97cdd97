"""The checks run on a parsed ModelConfig, each adding issues to a Checker."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2
from tritonclient.grpc.model_config_pb2 import ModelConfig

from ..inputs import DEFAULT_LIMITS
from .graph import CALLS_PARAMETER, parse_calls
from .report import Checker
from .untrusted import PLATFORM_BACKENDS

# Fields in the installed tritonclient proto (2.73) that the target server may not know.
# Verified: both are absent from the ModelConfig descriptor compiled into the 2.51.0
# libtritonserver (pytriton 0.7.0 wheel) and present in tritonclient 2.73; the two descriptors
# differ in nothing else, enum values included. 2.51 refuses `model_metrics` live
# (docs/TRITON.md §config). `added_in` is the first release after the change landed upstream
# (common#126, Oct 2024; server#8458, Oct 2025): an estimate, only "not in 2.51" is verified.
NEWER_FIELDS: dict[str, str] = {
    "model_metrics": "2.52",
    "ensemble_scheduling.max_inflight_requests": "2.63",
}

# Which file a backend or platform loads from the version folder; Triton's default names.
_MODEL_FILES = {
    "python": "model.py",
    "onnxruntime": "model.onnx",
    "onnxruntime_onnx": "model.onnx",
    "pytorch": "model.pt",
    "pytorch_libtorch": "model.pt",
    "tensorrt": "model.plan",
    "tensorrt_plan": "model.plan",
    "tensorflow_savedmodel": "model.savedmodel",
    "tensorflow_graphdef": "model.graphdef",
    "openvino": "model.xml",
}
_ENSEMBLE = "ensemble"


def run_checks(
    checker: Checker,
    config: ModelConfig,
    *,
    model_name: str,
    files: set[str],
    known_models: set[str],
    server_version: str,
) -> None:
    """Run every check of a parsed config; an empty name is filled in with `model_name`."""
    _check_name(checker, config, model_name)
    _check_backend_files(checker, config, files)
    _check_tensors(checker, config)
    _check_batching(checker, config)
    _check_instance_groups(checker, config)
    _check_ensemble(checker, config, known_models)
    _check_declared_calls(checker, config, known_models)
    _check_newer_fields(checker, config, server_version)
    _check_version_policy(checker, config)


def _check_name(checker: Checker, config: ModelConfig, model_name: str) -> None:
    if not config.name:
        config.name = model_name  # Triton takes the folder name; the stored config carries it.
    elif config.name != model_name:
        checker.error(
            f"name '{config.name}' differs from the model name '{model_name}'; Triton refuses "
            "a config whose name is not its folder's name. Change one to match.",
            field="name",
            line=checker.field_line("name"),
        )


def _check_backend_files(checker: Checker, config: ModelConfig, files: set[str]) -> None:
    backend, platform = config.backend, config.platform
    if not backend and not platform:
        checker.error(
            'Set backend (e.g. "python") or platform (e.g. "ensemble"); the config has neither.',
            field="backend",
        )
        return
    # An ensemble runs on no backend of its own: Triton's mapping names it for the allowlist.
    expected_backend = PLATFORM_BACKENDS.get(platform) if platform != _ENSEMBLE else None
    if backend and expected_backend and backend != expected_backend:
        checker.error(
            f"platform '{platform}' needs backend '{expected_backend}', not '{backend}'.",
            field="backend",
            line=checker.field_line("backend"),
        )
    if platform == _ENSEMBLE:
        return
    kind = platform if platform in _MODEL_FILES else backend
    wanted = config.default_model_filename or _MODEL_FILES.get(kind)
    if backend == "tensorflow" and not platform and not config.default_model_filename:
        wanted = "model.savedmodel" if _has(files, "model.savedmodel") else "model.graphdef"
    if wanted is None:
        checker.warning(
            f"Switchyard does not know which file '{backend or platform}' loads; make sure the "
            "version folder holds it.",
            field="backend" if backend else "platform",
        )
    elif not _has(files, wanted):
        field = "default_model_filename" if config.default_model_filename else "backend"
        checker.error(_missing_file_message(kind, wanted), field=field)


def _has(files: set[str], name: str) -> bool:
    return name in files or any(path.startswith(f"{name}/") for path in files)


def _missing_file_message(kind: str, wanted: str) -> str:
    if kind == "python":
        return (
            f"The version folder has no {wanted}: Triton's python backend would wait for it "
            "forever (the load never returns and the model stays LOADING). Upload "
            f"{wanted} or set default_model_filename."
        )
    return f"The version folder has no {wanted}, which {kind} loads; upload it."


def _tensors(config: ModelConfig) -> Iterator[tuple[str, int, Message]]:
    for kind in ("input", "output"):
        for index, tensor in enumerate(getattr(config, kind)):
            yield kind, index, tensor


def _check_tensors(checker: Checker, config: ModelConfig) -> None:
    for kind in ("input", "output"):
        tensors = getattr(config, kind)
        if not tensors:
            checker.error(f"The config declares no {kind}; declare at least one.", field=kind)
        names = [tensor.name for tensor in tensors]
        for name in sorted({n for n in names if names.count(n) > 1}):
            checker.error(
                f"{kind} name '{name}' is used more than once; {kind} names must be unique.",
                field=kind,
                line=checker.tensor_line(name),
            )
    for kind, index, tensor in _tensors(config):
        _check_tensor(checker, config, f"{kind}[{index}]", tensor)


def _check_tensor(checker: Checker, config: ModelConfig, where: str, tensor: Message) -> None:
    line = checker.tensor_line(tensor.name) if tensor.name else None
    label = f"'{tensor.name}'" if tensor.name else where
    if not tensor.name:
        checker.error(f"{where} has no name; give it one.", field=f"{where}.name")
    if tensor.data_type not in _valid_data_types():
        checker.error(
            f"{label} needs a data_type such as TYPE_FP32 (TYPE_INVALID or unset is refused).",
            field=f"{where}.data_type",
            line=line,
        )
    shapes = [("dims", list(tensor.dims))]
    if tensor.HasField("reshape"):
        shapes.append(("reshape", list(tensor.reshape.shape)))
    for attr, dims in shapes:
        if any(d == 0 or d < -1 for d in dims):
            checker.error(
                f"{label} has {attr} {dims}: each dimension must be >= 1, or -1 for any size.",
                field=f"{where}.{attr}",
                line=line,
            )
        elif math.prod(max(d, 1) for d in dims) > (
            limit := checker.max_elements or DEFAULT_LIMITS.max_elements
        ):
            # Warm-up and smoke requests are built from these dims in the control plane.
            checker.error(
                f"{label} has {attr} {dims}: more than {limit} elements "
                "per item; Switchyard builds warm-up requests of this shape and refuses it.",
                field=f"{where}.{attr}",
                line=line,
            )
    _check_batch_dim(checker, config.max_batch_size, where, label, tensor, line)


def _check_batch_dim(
    checker: Checker, max_batch: int, where: str, label: str, tensor: Message, line: int | None
) -> None:
    dims = list(tensor.dims)
    if max_batch > 0 and len(dims) > 1 and dims[0] == 1:
        sent = ", ".join(map(str, dims))
        checker.warning(
            f"{label} has dims {dims} while max_batch_size is {max_batch}: Triton adds the "
            f"batch dimension itself, so clients must send [B, {sent}]. Write dims "
            f"{dims[1:]} unless that extra 1 is intended.",
            field=f"{where}.dims",
            line=line,
        )


def _valid_data_types() -> set[int]:
    values = model_config_pb2.DataType.DESCRIPTOR.values
    return {v.number for v in values if v.name != "TYPE_INVALID"}


def _check_batching(checker: Checker, config: ModelConfig) -> None:
    max_batch = config.max_batch_size
    if max_batch < 0:
        checker.error(
            f"max_batch_size is {max_batch}; use 0 (no batching) or a positive size.",
            field="max_batch_size",
            line=checker.field_line("max_batch_size"),
        )
    if not config.HasField("dynamic_batching"):
        return
    line = checker.field_line("dynamic_batching")
    if max_batch == 0:
        checker.warning(
            "dynamic_batching has no effect while max_batch_size is 0; set max_batch_size "
            "or remove dynamic_batching.",
            field="dynamic_batching",
            line=line,
        )
    for size in config.dynamic_batching.preferred_batch_size:
        if size <= 0 or (max_batch > 0 and size > max_batch):
            checker.error(
                f"preferred_batch_size {size} must be between 1 and max_batch_size ({max_batch}).",
                field="dynamic_batching.preferred_batch_size",
                line=checker.field_line("preferred_batch_size") or line,
            )


def _check_instance_groups(checker: Checker, config: ModelConfig) -> None:
    kinds = model_config_pb2.ModelInstanceGroup.Kind
    line = checker.field_line("instance_group")
    for index, group in enumerate(config.instance_group):
        where = f"instance_group[{index}]"
        if group.kind not in kinds.values():
            checker.error(
                f"{where} kind {group.kind} is not one of {', '.join(kinds.keys())}.",
                field=f"{where}.kind",
                line=line,
            )
        if group.count < 0:
            checker.error(
                f"{where} count is {group.count}; use 1 or more (0 means the default, 1).",
                field=f"{where}.count",
                line=line,
            )
        if group.kind in (kinds.Value("KIND_CPU"), kinds.Value("KIND_MODEL")) and group.gpus:
            checker.warning(
                f"{where} is {kinds.Name(group.kind)} but lists gpus {list(group.gpus)}; "
                "the gpus are ignored for this kind. Remove them or use KIND_GPU.",
                field=f"{where}.gpus",
                line=line,
            )


def _check_ensemble(checker: Checker, config: ModelConfig, known_models: set[str]) -> None:
    if config.platform != _ENSEMBLE:
        return
    steps = config.ensemble_scheduling.step
    if not steps:
        checker.error(
            "An ensemble needs ensemble_scheduling with at least one step.",
            field="ensemble_scheduling",
        )
    for index, step in enumerate(steps):
        where = f"ensemble_scheduling.step[{index}].model_name"
        line = checker.line_of(rf"""model_name\s*:\s*["']{re.escape(step.model_name)}["']""")
        if step.model_name == config.name:
            checker.error(
                f"Ensemble step {index} calls the ensemble itself ('{step.model_name}').",
                field=where,
                line=line,
            )
        elif step.model_name not in known_models:
            checker.error(
                f"Ensemble step {index} uses model '{step.model_name}', which is not "
                "registered; register it first or fix the name.",
                field=where,
                line=line,
            )


def _check_declared_calls(checker: Checker, config: ModelConfig, known_models: set[str]) -> None:
    """The models a BLS model declares it calls (graph.CALLS_PARAMETER) parse, are registered
    and are not itself."""
    if CALLS_PARAMETER not in config.parameters:
        return
    where = f"parameters[{CALLS_PARAMETER!r}]"
    line = checker.line_of(re.escape(CALLS_PARAMETER))
    try:
        calls = parse_calls(config.parameters[CALLS_PARAMETER].string_value)
    except ValueError as exc:
        checker.error(str(exc), field=where, line=line)
        return
    for call in calls:
        if call.model == config.name:
            checker.error(f"{CALLS_PARAMETER} names the model itself.", field=where, line=line)
        elif call.model not in known_models:
            checker.error(
                f"{CALLS_PARAMETER} names model '{call.model}', which is not registered; "
                "register it first or fix the name.",
                field=where,
                line=line,
            )


def _set_fields(message: Message, prefix: str = "", path: str = "") -> Iterator[tuple[str, str]]:
    """(schema path, indexed path) of every field set in `message`, recursively."""
    for descriptor, value in message.ListFields():
        schema = f"{prefix}{descriptor.name}"
        indexed = f"{path}{descriptor.name}"
        yield schema, indexed
        if descriptor.message_type is None:
            continue
        if descriptor.message_type.GetOptions().map_entry:
            items = [(f"{indexed}[{key!r}]", v) for key, v in value.items()]
            items = [(p, v) for p, v in items if isinstance(v, Message)]
        elif descriptor.is_repeated:
            items = [(f"{indexed}[{i}]", v) for i, v in enumerate(value)]
        else:
            items = [(indexed, value)]
        for item_path, item in items:
            yield from _set_fields(item, f"{schema}.", f"{item_path}.")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _check_newer_fields(checker: Checker, config: ModelConfig, server_version: str) -> None:
    target = _version(server_version)
    short = ".".join(server_version.split(".")[:2])
    for schema, indexed in _set_fields(config):
        added_in = NEWER_FIELDS.get(schema)
        if added_in is None or target >= _version(added_in):
            continue
        checker.error(
            f"field '{schema}' is not known to Triton {short} (added in a later release, "
            f"about {added_in}); remove it.",
            field=indexed,
            line=checker.field_line(schema.rsplit(".", 1)[-1]),
        )


def _check_version_policy(checker: Checker, config: ModelConfig) -> None:
    if config.HasField("version_policy"):
        checker.warning(
            "version_policy is ignored: Switchyard owns it and replaces it with the versions "
            "it serves when it loads the model.",
            field="version_policy",
            line=checker.field_line("version_policy"),
        )
