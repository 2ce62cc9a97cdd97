"""Checks of what an upload could make a Triton node load or run: native code, paths
outside the model folder, backends nobody allowed, python models that crash the server.

Pure: the config is a parsed ModelConfig, files are (path, first bytes) pairs and python
sources are bytes, parsed with `ast` and never imported or run (docs/SECURITY.md).
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterable, Iterator

from google.protobuf.message import Message
from tritonclient.grpc.model_config_pb2 import ModelConfig

from .graph import CALLS_PARAMETER
from .report import Checker, ConfigIssue

DEFAULT_ALLOWED_BACKENDS = (
    "python",
    "onnxruntime",
    "pytorch",
    "tensorflow",
    "tensorrt",
    "openvino",
    "fil",
    "ensemble",
)
# The backend each platform runs on (Triton's own mapping).
PLATFORM_BACKENDS = {
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "tensorflow_savedmodel": "tensorflow",
    "tensorflow_graphdef": "tensorflow",
    "tensorrt_plan": "tensorrt",
    "ensemble": "ensemble",
}
MODEL_DIR_VARIABLE = "$$TRITON_MODEL_DIRECTORY"
ELF_MAGIC = b"\x7fELF"
PYTHON_CLASS = "TritonPythonModel"
_LIBRARY_NAME = re.compile(r"\.so(\.[^/]*)?$")


def backend_of(backend: str, platform: str) -> str:
    """The backend a config runs on: its `backend`, else its platform's ('' when unknown)."""
    return backend or PLATFORM_BACKENDS.get(platform, "")


def check_untrusted(
    checker: Checker, config: ModelConfig, *, allowed: set[str], custom: set[str]
) -> None:
    """Refuse unknown backends and platforms, op libraries, runtime paths and parameters
    whose value is a path leaving the model folder."""
    _check_backend_allowed(checker, config, allowed, custom)
    if config.model_operations.op_library_filename:
        checker.error(
            "model_operations.op_library_filename makes Triton load a shared library from the "
            "node's disk; Switchyard refuses it. Remove model_operations.",
            field="model_operations.op_library_filename",
            line=checker.field_line("op_library_filename"),
        )
    if config.runtime and (
        "/" in config.runtime or "\\" in config.runtime or ".." in config.runtime
    ):
        checker.error(
            f"runtime '{config.runtime}' is a path; name a file of the backend's own folder.",
            field="runtime",
            line=checker.field_line("runtime"),
        )
    for where, key, value in _parameters(config):
        _check_parameter(checker, where, key, value)


def _check_backend_allowed(
    checker: Checker, config: ModelConfig, allowed: set[str], custom: set[str]
) -> None:
    if config.platform and config.platform not in PLATFORM_BACKENDS:
        checker.error(
            f"platform '{config.platform}' is not one Switchyard knows "
            f"({', '.join(sorted(PLATFORM_BACKENDS))}); use one of them or a backend.",
            field="platform",
            line=checker.field_line("platform"),
        )
        return
    backend = backend_of(config.backend, config.platform)
    if not backend or backend in allowed or backend in custom:
        return
    checker.error(
        f"backend '{backend}' is not allowed: Switchyard loads the backends of "
        f"SWITCHYARD_ALLOWED_BACKENDS ({', '.join(sorted(allowed))}) and those an operator "
        "allows on a cluster (the cluster's custom_backends), and no cluster allows this one.",
        field="backend" if config.backend else "platform",
        line=checker.field_line("backend" if config.backend else "platform"),
    )


def _parameters(message: Message, path: str = "") -> Iterator[tuple[str, str, str]]:
    """(where, key, string value) of every entry of every `parameters` map, recursively."""
    for descriptor, value in message.ListFields():
        where = f"{path}{descriptor.name}"
        if descriptor.message_type is None:
            continue
        if descriptor.message_type.GetOptions().map_entry:
            for key, item in value.items():
                text = getattr(item, "string_value", item)
                if descriptor.name == "parameters" and isinstance(text, str):
                    yield where, key, text
                if isinstance(item, Message):
                    yield from _parameters(item, f"{where}[{key!r}].")
        elif descriptor.is_repeated:
            for index, item in enumerate(value):
                yield from _parameters(item, f"{where}[{index}].")
        else:
            yield from _parameters(value, f"{where}.")


def _check_parameter(checker: Checker, where: str, key: str, value: str) -> None:
    env_path = key == "EXECUTION_ENV_PATH"
    if not (path_leaves_model_dir(value) or (env_path and not _in_model_dir(value))):
        return
    rule = (
        f"{key} must name a file inside the model folder ({MODEL_DIR_VARIABLE}/...)"
        if env_path
        else "a parameter may not point outside the model folder"
    )
    checker.error(
        f"parameter {key} is '{value}': {rule}; Triton would read it from the node's disk.",
        field=f"{where}[{key!r}]",
        line=checker.line_of(rf"""["']{re.escape(key)}["']""") or checker.field_line("parameters"),
    )


def _in_model_dir(value: str) -> bool:
    return value.strip().startswith(f"{MODEL_DIR_VARIABLE}/") and not path_leaves_model_dir(value)


def path_leaves_model_dir(value: str) -> bool:
    """True when `value` reads as a path outside the model folder: absolute, home-relative,
    climbing with '..', or $$TRITON_MODEL_DIRECTORY followed by a climb out of it."""
    text = value.strip().replace("\\", "/")
    if text.startswith(MODEL_DIR_VARIABLE):
        rest = text[len(MODEL_DIR_VARIABLE) :].lstrip("/")
        normal = posixpath.normpath(rest) if rest else "."
        return normal == ".." or normal.startswith("../")
    if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:/", text):
        return True
    return ".." in text.split("/")


def library_issues(
    files: Iterable[tuple[str, bytes]], *, backend: str, custom: set[str], prefix: str = ""
) -> list[ConfigIssue]:
    """An error per shared library among (version-relative path, first bytes): by name
    (`*.so`, `*.so.*`) or ELF magic; `libtriton_<backend>.so` at the version folder's top
    passes only for a backend a cluster allows explicitly (`custom`). `prefix` (the
    archive's version folder, "1/") goes before each path named."""
    issues = []
    for relative, head in files:
        name, path = posixpath.basename(relative), f"{prefix}{relative}"
        if not (_LIBRARY_NAME.search(name) or head.startswith(ELF_MAGIC)):
            continue
        if backend in custom and relative == f"libtriton_{backend}.so":
            continue
        message = (
            f"{path} is a shared library (native code Triton would load on the node); "
            "uploads may not carry any, except libtriton_<backend>.so for a backend a "
            "cluster allows in its custom_backends."
        )
        issues.append(ConfigIssue("error", message, file=path))
    return issues


def python_model_issues(source: bytes, *, file: str) -> list[ConfigIssue]:
    """Errors of a python backend's model file, read with `ast` only: not UTF-8, a syntax
    error (with its line), or no class TritonPythonModel with an `execute` method."""
    try:
        tree = ast.parse(source.decode("utf-8"), filename=file)
    except UnicodeDecodeError:
        return [ConfigIssue("error", f"{file} is not UTF-8 text.", file=file)]
    except SyntaxError as exc:
        message = f"{file} does not parse: {exc.msg} (line {exc.lineno})."
        return [ConfigIssue("error", message, file=file, line=exc.lineno, column=exc.offset)]
    except (RecursionError, MemoryError, ValueError):
        return [ConfigIssue("error", f"{file} nests too deeply to be read.", file=file)]
    classes = {node.name: node for node in _top_level(tree.body) if isinstance(node, ast.ClassDef)}
    model = classes.get(PYTHON_CLASS)
    if model is None:
        message = (
            f"{file} defines no class {PYTHON_CLASS}; the python backend needs one (defined in "
            "this file, not imported)."
        )
        return [ConfigIssue("error", message, file=file)]
    if not _has_execute(model, classes, seen=set()):
        message = (
            f"class {PYTHON_CLASS} in {file} has no execute method: such a model loads READY "
            "and its first inference crashes the whole Triton server (every model on the "
            "node). Define execute(self, requests) on the class (sync or async)."
        )
        return [ConfigIssue("error", message, file=file, line=model.lineno)]
    return []


def python_calls_issues(source: bytes, *, file: str, declared: bool) -> list[ConfigIssue]:
    """A python model whose code calls other models through Triton (BLS: `InferenceRequest`)
    must declare them in its config (graph.CALLS_PARAMETER; `declared` False when it does
    not): an error naming the call's line and the names it passes as literals. Source that
    does not parse: [] (python_model_issues says so). What a declaration lists is the
    author's: names built at run time cannot be checked."""
    try:
        tree = ast.parse(source.decode("utf-8"), filename=file)
    except (UnicodeDecodeError, SyntaxError, RecursionError, MemoryError, ValueError):
        return []
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _is_bls(node)]
    if not calls:
        return []
    names = sorted({name for call in calls if (name := _literal_model_name(call))})
    if declared:
        return []
    listed = ", ".join(names) or "<the models it calls>"
    message = (
        f"{file} calls other models through Triton (InferenceRequest, line "
        f"{calls[0].lineno}) but its config declares none: add parameters {{ key: "
        f'"{CALLS_PARAMETER}" value: {{ string_value: "{listed}" }} }}. Declared, they are '
        "deployed before it and its smoke test loads them; undeclared, a call failing in "
        "the load's warm-up took a Triton node down (SIGSEGV)."
    )
    return [ConfigIssue("error", message, file=file, line=calls[0].lineno)]


def _is_bls(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "InferenceRequest"


def _literal_model_name(call: ast.Call) -> str:
    for keyword in call.keywords:
        value = keyword.value
        if keyword.arg == "model_name" and isinstance(value, ast.Constant):
            return str(value.value)
    return ""


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module statements, looking into top-level if/try blocks (guarded definitions)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            yield from _top_level(node.body + handlers + node.orelse + node.finalbody)


def _has_execute(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], *, seen: set) -> bool:
    """True when `cls` or a base class defined in the same file defines `execute`."""
    seen.add(cls.name)
    for node in _top_level(cls.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "execute":
            return True
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "execute" for t in targets):
            return True
    bases = [b.id for b in cls.bases if isinstance(b, ast.Name)]
    return any(
        _has_execute(classes[name], classes, seen=seen)
        for name in bases
        if name in classes and name not in seen
    )
