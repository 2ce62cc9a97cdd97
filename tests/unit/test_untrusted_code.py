"""The checks of what an upload could make a node load or run, as pure functions."""

from pathlib import Path

import pytest

from integrations.triton.model_config import (
    library_issues,
    python_calls_issues,
    python_model_issues,
    validate_model_config,
)
from integrations.triton.model_config.untrusted import path_leaves_model_dir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
TEST_MODELS = Path(__file__).resolve().parents[1] / "triton_models"

TENSORS = """\
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


def _errors(text: str, files=("model.py",), **kwargs) -> list:
    report = validate_model_config(text, model_name="m", version_files=files, **kwargs)
    return report.errors


def test_an_unknown_backend_is_refused_with_its_line():
    text = f'name: "m"\n# custom\nbackend: "evil"\n{TENSORS}'
    (error,) = _errors(text, files=("libtriton_evil.so",))
    assert "backend 'evil' is not allowed" in error.message and "custom_backends" in error.message
    assert (error.file, error.line, error.field) == ("config.pbtxt", 3, "backend")


def test_a_backend_some_cluster_allows_passes_the_config_check():
    text = f'name: "m"\nbackend: "evil"\n{TENSORS}'
    assert _errors(text, files=("x",), custom_backends={"evil"}) == []


def test_an_unknown_platform_is_refused_and_known_platforms_map_to_their_backend():
    (error,) = _errors(f'name: "m"\nplatform: "mystery_plan"\n{TENSORS}', files=("model.plan",))
    assert "platform 'mystery_plan'" in error.message and error.line == 2
    text = f'name: "m"\nplatform: "onnxruntime_onnx"\n{TENSORS}'
    assert _errors(text, files=("model.onnx",)) == []
    refused = _errors(text, files=("model.onnx",), allowed_backends={"python"})
    assert "backend 'onnxruntime' is not allowed" in refused[0].message


def test_op_library_filename_is_refused_with_its_line():
    text = (
        f'name: "m"\nbackend: "python"\n{TENSORS}'
        'model_operations {\n  op_library_filename: "/opt/evil.so"\n}\n'
    )
    (error,) = _errors(text)
    assert "op_library_filename" in error.message and error.line == 6


@pytest.mark.parametrize(
    "value",
    [
        "/opt/envs/evil.tar.gz",
        "../../etc/passwd",
        "$$TRITON_MODEL_DIRECTORY/../../other/env.tar.gz",
        "~/env.tar.gz",
        "env.tar.gz",  # relative to the server's folder, not the model's
    ],
)
def test_execution_env_path_outside_the_model_folder_is_refused(value):
    text = (
        f'name: "m"\nbackend: "python"\n{TENSORS}'
        f'parameters: {{\n  key: "EXECUTION_ENV_PATH"\n  value: {{ string_value: "{value}" }}\n}}\n'
    )
    (error,) = _errors(text)
    assert "EXECUTION_ENV_PATH" in error.message and error.line == 6


def test_execution_env_path_inside_the_model_folder_passes():
    value = "$$TRITON_MODEL_DIRECTORY/1/env.tar.gz"
    text = (
        f'name: "m"\nbackend: "python"\n{TENSORS}'
        f'parameters: {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{value}" }} }}\n'
    )
    assert _errors(text) == []


def test_any_parameter_pointing_outside_the_model_folder_is_refused():
    text = (
        f'name: "m"\nbackend: "python"\n{TENSORS}'
        'parameters: { key: "LABELS" value: { string_value: "labels.txt" } }\n'
        'parameters: { key: "CACHE" value: { string_value: "/var/cache/x" } }\n'
    )
    (error,) = _errors(text)
    assert "parameter CACHE" in error.message and error.line == 6


@pytest.mark.parametrize(
    ("value", "outside"),
    [
        ("a/b", False),
        ("a/../b", True),
        ("$$TRITON_MODEL_DIRECTORY/1/../x", False),
        ("$$TRITON_MODEL_DIRECTORY/..", True),
        ("C:\\models", True),
        ("plain words", False),
    ],
)
def test_path_rule(value, outside):
    assert path_leaves_model_dir(value) is outside


def test_a_runtime_path_is_refused():
    text = f'name: "m"\nbackend: "python"\nruntime: "/tmp/libevil.so"\n{TENSORS}'
    (error,) = _errors(text)
    assert error.field == "runtime" and error.line == 3


def test_shared_libraries_are_refused_by_name_and_by_elf_magic():
    files = [
        ("model.py", b"clas"),
        ("lib/helper.so", b"\x00\x00\x00\x00"),
        ("libfoo.so.1.2", b"abcd"),
        ("weights.bin", b"\x7fELF"),
        ("libtriton_python.so", b"\x7fELF"),
    ]
    issues = library_issues(files, backend="python", custom=set(), prefix="1/")
    assert [i.file for i in issues] == [
        "1/lib/helper.so",
        "1/libfoo.so.1.2",
        "1/weights.bin",
        "1/libtriton_python.so",
    ]
    assert all("shared library" in i.message for i in issues)


def test_the_backend_library_passes_only_for_an_explicitly_allowed_backend_at_the_top():
    files = [("libtriton_evil.so", b"\x7fELF")]
    assert library_issues(files, backend="evil", custom={"evil"}) == []
    assert len(library_issues(files, backend="evil", custom=set())) == 1
    nested = [("sub/libtriton_evil.so", b"\x7fELF")]
    assert len(library_issues(nested, backend="evil", custom={"evil"})) == 1
    other = [("libtriton_other.so", b"\x7fELF")]
    assert len(library_issues(other, backend="evil", custom={"evil"})) == 1


def test_a_python_syntax_error_is_refused_with_file_and_line():
    (issue,) = python_model_issues(b"import os\n\ndef broken(:\n", file="1/model.py")
    assert issue.file == "1/model.py" and issue.line == 3 and "does not parse" in issue.message


def test_a_python_model_without_execute_is_refused_naming_the_class():
    source = b"class TritonPythonModel:\n    def initialize(self, args):\n        pass\n"
    (issue,) = python_model_issues(source, file="1/model.py")
    assert "TritonPythonModel" in issue.message and "execute" in issue.message
    assert issue.line == 1


def test_a_python_model_without_the_class_is_refused():
    source = b"from elsewhere import TritonPythonModel\n"
    (issue,) = python_model_issues(source, file="model.py")
    assert "defines no class TritonPythonModel" in issue.message


@pytest.mark.parametrize(
    "source",
    [
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n",
        "class TritonPythonModel:\n    async def execute(self, requests):\n        return []\n",
        "class Base:\n    def execute(self, r):\n        return []\n\n"
        "class TritonPythonModel(Base):\n    pass\n",
        "try:\n    import numpy\nexcept ImportError:\n    pass\n\n"
        "class TritonPythonModel:\n    def _run(self, r):\n        return []\n"
        "    execute = _run\n",
    ],
)
def test_python_models_with_execute_pass(source):
    assert python_model_issues(source.encode(), file="model.py") == []


def test_non_utf8_and_deeply_nested_python_is_refused_unrun():
    assert "not UTF-8" in python_model_issues(b"\xff\xfe", file="m.py")[0].message
    deep = ("(" * 200_000 + ")" * 200_000).encode()
    assert python_model_issues(deep, file="m.py")[0].severity == "error"


def test_the_example_and_test_models_pass():
    models = [*EXAMPLES.iterdir(), *(p for p in TEST_MODELS.iterdir() if p.is_dir())]
    roots = [m for m in models if (m / "config.pbtxt").exists()]
    known = {root.name for root in roots}  # registered together: steps and calls are known
    for root in roots:
        text = (root / "config.pbtxt").read_text()
        versions = [v for v in root.iterdir() if v.name.isdigit()]
        if not versions:  # an ensemble: its config alone
            report = validate_model_config(
                text, model_name=root.name, version_files=[], known_models=known
            )
            assert report.errors == [] and "ensemble" in text, root
        for version in versions:
            files = [p.relative_to(version).as_posix() for p in version.rglob("*") if p.is_file()]
            report = validate_model_config(
                text, model_name=root.name, version_files=files, known_models=known
            )
            assert report.errors == [], (root, version)
            heads = [(f, (version / f).read_bytes()[:4]) for f in files]
            assert library_issues(heads, backend="python", custom=set()) == []
            source = (version / "model.py").read_bytes()
            assert python_model_issues(source, file="model.py") == [], (root, version)


BLS = b"""import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            call = pb_utils.InferenceRequest(model_name="risk_score", inputs=[])
            other = InferenceRequest(model_name=self.name, inputs=[])
            out.append(call.exec())
        return out
"""


def test_a_python_model_calling_models_must_declare_them():
    (issue,) = python_calls_issues(BLS, file="1/model.py", declared=False)
    assert (issue.severity, issue.file, issue.line) == ("error", "1/model.py", 8)
    assert 'string_value: "risk_score" }' in issue.message  # the literal name suggested
    assert python_calls_issues(BLS, file="1/model.py", declared=True) == []
    plain = b"class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    assert python_calls_issues(plain, file="model.py", declared=False) == []
    assert python_calls_issues(b"def (", file="model.py", declared=False) == []
