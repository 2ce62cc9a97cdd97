"""Checks of config.pbtxt against Triton's ModelConfig schema, as pure functions."""

import json
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, json_format
from tritonclient.grpc import model_config_pb2

from integrations.triton.inputs import generate_inputs
from integrations.triton.model_config import (
    NEWER_FIELDS,
    ConfigIssue,
    add_native_warmup,
    config_for_serving,
    config_to_dict,
    native_warmup_skip_reason,
    validate_model_config,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"

BASE = """\
name: "m"
backend: "python"
max_batch_size: 8
input [
  {
    name: "IN"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUT"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }
]
"""

ENSEMBLE = """\
name: "pipe"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 128 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "STEP_MODEL"
      model_version: -1
      input_map { key: "FEATURES" value: "IN" }
      output_map { key: "SCORE" value: "OUT" }
    }
  ]
}
"""


def check(text: str, files=("model.py",), model_name="m", **kwargs):
    return validate_model_config(text, model_name=model_name, version_files=files, **kwargs)


def only_issue(report) -> ConfigIssue:
    assert len(report.issues) == 1, report.issues
    return report.issues[0]


def version_files(model: str, version: str) -> list[str]:
    folder = EXAMPLES / model / version
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()]


@pytest.mark.parametrize("model", ["risk_score", "ticket_router", "token_stream"])
def test_example_configs_are_valid_with_no_warnings(model):
    text = (EXAMPLES / model / "config.pbtxt").read_text()
    report = validate_model_config(text, model_name=model, version_files=version_files(model, "1"))
    assert report.issues == []
    assert report.is_valid
    assert report.config.name == model
    assert report.as_dict() == {"valid": True, "errors": [], "warnings": []}


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_missing_or_empty_config_is_an_error_because_the_model_would_load_without_inputs(text):
    report = check(text)
    issue = only_issue(report)
    assert (issue.severity, report.config, report.is_valid) == ("error", None, False)
    assert "no inputs or outputs" in issue.message


@pytest.mark.parametrize(
    "text, line, column, fragment",
    [
        (BASE.replace("TYPE_FP32", "FP32", 1), 7, 16, "did you mean TYPE_FP32"),
        (BASE + "max_queue_size: 3\n", 18, 1, "unknown field 'max_queue_size' in ModelConfig"),
        (BASE.replace("  }\n]\noutput", "]\noutput", 1), 9, 1, "syntax error"),
        (BASE.replace("max_batch_size: 8", "max_batch_size: eight"), 3, 17, "integer"),
        (
            BASE + "instance_group [ { kind: KIND_TPU } ]\n",
            18,
            26,
            "not a valid ModelInstanceGroup",
        ),
    ],
)
def test_syntax_errors_carry_the_parsers_line_and_column(text, line, column, fragment):
    report = check(text)
    issue = only_issue(report)
    assert report.config is None
    assert (issue.severity, issue.line, issue.column) == ("error", line, column)
    assert fragment in issue.message
    assert not issue.message[0].isdigit()  # the "7:16 : " prefix is gone


def test_empty_name_is_filled_in_with_the_model_name():
    report = check(BASE.replace('name: "m"\n', ""), model_name="fraud")
    assert report.issues == []
    assert report.config.name == "fraud"


def test_name_that_differs_from_the_model_is_an_error_naming_both():
    issue = only_issue(check(BASE, model_name="fraud"))
    assert issue.severity == "error"
    assert "'m'" in issue.message and "'fraud'" in issue.message
    assert (issue.field, issue.line) == ("name", 1)


def test_python_version_without_model_py_is_an_error_because_the_load_would_hang():
    issue = only_issue(check(BASE, files=["weights.npz"]))
    assert issue.severity == "error"
    assert "model.py" in issue.message and "forever" in issue.message


def test_python_default_model_filename_replaces_model_py():
    text = BASE + 'default_model_filename: "serve.py"\n'
    assert check(text, files=["serve.py"]).issues == []
    issue = only_issue(check(text, files=["model.py"]))
    assert "serve.py" in issue.message and issue.field == "default_model_filename"


@pytest.mark.parametrize(
    "kind, files",
    [
        ('backend: "onnxruntime"', ["model.onnx"]),
        ('platform: "onnxruntime_onnx"', ["model.onnx"]),
        ('platform: "pytorch_libtorch"', ["model.pt"]),
        ('backend: "pytorch"', ["model.pt"]),
        ('backend: "tensorrt"', ["model.plan"]),
        ('platform: "tensorrt_plan"', ["model.plan"]),
        ('platform: "tensorflow_savedmodel"', ["model.savedmodel/saved_model.pb"]),
        ('platform: "tensorflow_graphdef"', ["model.graphdef"]),
        ('backend: "openvino"', ["model.xml", "model.bin"]),
        ('platform: "onnxruntime_onnx"\nbackend: "onnxruntime"', ["./model.onnx"]),
    ],
)
def test_backend_with_its_model_file_is_valid_even_if_this_cluster_lacks_that_backend(kind, files):
    text = BASE.replace('backend: "python"', kind)
    assert check(text, files=files).issues == []
    issue = only_issue(check(text, files=["model.py"]))
    assert issue.severity == "error"
    assert files[0].removeprefix("./").split("/")[0] in issue.message


def test_neither_backend_nor_platform_is_an_error():
    issue = only_issue(check(BASE.replace('backend: "python"\n', "")))
    assert issue.severity == "error" and "backend" in issue.message


def test_platform_and_backend_that_disagree_is_an_error():
    text = BASE.replace('backend: "python"', 'platform: "onnxruntime_onnx"\nbackend: "python"')
    report = check(text, files=["model.onnx"])
    assert "platform 'onnxruntime_onnx' needs backend 'onnxruntime'" in only_issue(report).message


def test_unknown_backend_is_a_warning_not_an_error():
    issue = only_issue(check(BASE.replace('"python"', '"fil"'), files=["xgboost.json"]))
    assert issue.severity == "warning" and "'fil'" in issue.message


def _drop_block(text: str, opener: str) -> str:
    start = text.index(opener)
    end = text.index("\n]\n", start) + 3
    return text[:start] + text[end:]


@pytest.mark.parametrize(
    "text, fragment, field",
    [
        (_drop_block(BASE, "input ["), "declares no input", "input"),
        (_drop_block(BASE, "output ["), "declares no output", "output"),
        (
            BASE.replace("output [", 'output [ { name: "OUT" data_type: TYPE_FP32 dims: [1] },'),
            "more than once",
            "output",
        ),
        (BASE.replace("TYPE_FP32", "TYPE_INVALID", 1), "needs a data_type", "input[0].data_type"),
        (
            BASE.replace("    data_type: TYPE_FP32\n", "", 1),
            "needs a data_type",
            "input[0].data_type",
        ),
        (BASE.replace("TYPE_FP32", "99", 1), "needs a data_type", "input[0].data_type"),
        (BASE.replace("[ 4 ]", "[ 0 ]"), "'IN' has dims [0]", "input[0].dims"),
        (BASE.replace("[ 4 ]", "[ 4, -2 ]"), "'IN' has dims [4, -2]", "input[0].dims"),
        (
            BASE.replace("[ 1 ]", "[ 1 ] reshape { shape: [ 0 ] }"),
            "reshape [0]",
            "output[0].reshape",
        ),
    ],
)
def test_tensor_mistakes_are_errors_naming_the_tensor(text, fragment, field):
    errors = check(text).errors
    assert [(fragment in e.message, e.field) for e in errors] == [(True, field)], errors


def test_minus_one_dims_are_allowed():
    assert check(BASE.replace("dims: [ 4 ]", "dims: [ -1, 4 ]")).issues == []


def test_leading_one_in_dims_with_batching_warns_that_clients_must_send_an_extra_dimension():
    issue = only_issue(check(BASE.replace("dims: [ 4 ]", "dims: [ 1, 128 ]")))
    assert issue.severity == "warning"
    assert "[B, 1, 128]" in issue.message
    assert (issue.field, issue.line) == ("input[0].dims", 6)


def test_leading_one_in_dims_without_batching_is_fine():
    text = BASE.replace("max_batch_size: 8", "max_batch_size: 0").replace("[ 4 ]", "[ 1, 128 ]")
    assert check(text).issues == []


@pytest.mark.parametrize(
    "extra, severity, fragment",
    [
        ("", "error", "max_batch_size is -1"),
        (
            "dynamic_batching { preferred_batch_size: [ 4, 16 ] }",
            "error",
            "preferred_batch_size 16",
        ),
        ("dynamic_batching { preferred_batch_size: [ 0 ] }", "error", "preferred_batch_size 0"),
    ],
)
def test_batching_mistakes(extra, severity, fragment):
    text = BASE + extra + "\n"
    if not extra:
        text = BASE.replace("max_batch_size: 8", "max_batch_size: -1")
    issue = only_issue(check(text))
    assert (issue.severity, fragment in issue.message) == (severity, True), issue


def test_dynamic_batching_without_max_batch_size_is_a_warning_that_it_has_no_effect():
    text = BASE.replace("max_batch_size: 8", "max_batch_size: 0") + "dynamic_batching { }\n"
    issue = only_issue(check(text))
    assert issue.severity == "warning" and "no effect" in issue.message
    assert issue.line == 18


@pytest.mark.parametrize(
    "group, severity, fragment",
    [
        ("kind: 7", "error", "kind 7 is not one of"),
        ("count: -1", "error", "count is -1"),
        ("kind: KIND_CPU gpus: [ 0 ]", "warning", "KIND_CPU but lists gpus [0]"),
    ],
)
def test_instance_group_mistakes(group, severity, fragment):
    issue = only_issue(check(BASE + f"instance_group [ {{ {group} }} ]\n"))
    assert (issue.severity, issue.field) == (severity, issue.field)
    assert fragment in issue.message
    assert issue.field.startswith("instance_group[0].")


@pytest.mark.parametrize("group", ["count: 0", "kind: KIND_GPU gpus: [ 0, 1 ]", "kind: KIND_MODEL"])
def test_valid_instance_groups_pass(group):
    assert check(BASE + f"instance_group [ {{ {group} }} ]\n").issues == []


def test_ensemble_needs_no_files_and_accepts_known_step_models():
    text = ENSEMBLE.replace("STEP_MODEL", "risk_score")
    report = check(text, files=[], model_name="pipe", known_models=["risk_score"])
    assert report.issues == []


def test_ensemble_step_with_an_unknown_model_is_an_error():
    text = ENSEMBLE.replace("STEP_MODEL", "nope")
    issue = only_issue(check(text, files=[], model_name="pipe", known_models=["risk_score"]))
    assert issue.severity == "error" and "'nope'" in issue.message
    assert (issue.field, issue.line) == ("ensemble_scheduling.step[0].model_name", 9)


def test_ensemble_step_calling_itself_is_an_error():
    text = ENSEMBLE.replace("STEP_MODEL", "pipe")
    issue = only_issue(check(text, files=[], model_name="pipe", known_models=["pipe"]))
    assert "itself" in issue.message


def _calls(value: str) -> str:
    return BASE + f'parameters {{ key: "switchyard.calls" value: {{ string_value: "{value}" }} }}\n'


def test_a_bls_model_declares_registered_models_it_calls():
    assert (
        check(
            _calls("risk_score, ticket_router:2"), known_models=["risk_score", "ticket_router"]
        ).issues
        == []
    )
    issue = only_issue(check(_calls("risk_score,nope"), known_models=["risk_score"]))
    assert (
        issue.severity == "error" and "names model 'nope', which is not registered" in issue.message
    )
    assert issue.field == "parameters['switchyard.calls']" and issue.line is not None
    assert "names the model itself" in only_issue(check(_calls("m"), known_models=["m"])).message
    assert "is not a model name" in only_issue(check(_calls("risk_score:v2"))).message


def test_version_policy_is_a_warning_that_switchyard_replaces_it():
    issue = only_issue(check(BASE + "version_policy { all { } }\n"))
    assert issue.severity == "warning" and "Switchyard owns it" in issue.message
    assert (issue.field, issue.line) == ("version_policy", 18)


MODEL_METRICS = """model_metrics {
  metric_control [ {
    metric_identifier { family: "nv_inference_request_duration" }
    histogram_options { buckets: [ 0.1, 1.0 ] }
  } ]
}
"""


def test_model_metrics_is_refused_for_triton_2_51_which_does_not_know_it():
    issue = only_issue(check(BASE + MODEL_METRICS))
    assert issue.severity == "error"
    assert "field 'model_metrics' is not known to Triton 2.51" in issue.message
    assert (issue.field, issue.line) == ("model_metrics", 18)


def test_newer_fields_are_accepted_by_a_server_that_knows_them():
    assert check(BASE + MODEL_METRICS, server_version="2.73.0").issues == []


def test_ensemble_max_inflight_requests_is_refused_for_triton_2_51():
    text = ENSEMBLE.replace("STEP_MODEL", "risk_score").replace(
        "ensemble_scheduling {", "ensemble_scheduling {\n  max_inflight_requests: 4"
    )
    issue = only_issue(check(text, files=[], model_name="pipe", known_models=["risk_score"]))
    assert "'ensemble_scheduling.max_inflight_requests'" in issue.message


def _server_2_51_model_config() -> descriptor_pb2.FileDescriptorProto | None:
    """The model_config.proto descriptor compiled into pytriton 0.7.0's 2.51 libtritonserver."""
    libs = Path(sys.prefix, "lib", "python3.11", "site-packages", "nvidia_pytriton.libs")
    found = sorted(libs.glob("libtritonserver*.so"))
    if not found:
        return None
    data = found[0].read_bytes()
    start = data.find(b"\n\x12model_config.proto")
    end = start
    while True:  # walk top-level fields (varint or length-delimited) until a foreign tag
        tag, pos = _varint(data, end)
        if not 1 <= tag >> 3 <= 14 or tag & 7 not in (0, 2):
            break
        value, pos = _varint(data, pos)
        end = pos + (value if tag & 7 == 2 else 0)
    return descriptor_pb2.FileDescriptorProto.FromString(data[start:end])


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _field_paths(message, prefix="", seen=frozenset()) -> set[str]:
    paths = set()
    for field in message.fields:
        path = f"{prefix}{field.name}"
        paths.add(path)
        target = field.message_type
        if target is not None and target.GetOptions().map_entry:
            target = target.fields_by_name["value"].message_type
        if target is not None and target.full_name not in seen:
            paths |= _field_paths(target, f"{path}.", seen | {target.full_name})
    return paths


def test_newer_fields_table_matches_the_2_51_server_binary():
    old_file = _server_2_51_model_config()
    if old_file is None:
        pytest.skip("the pytriton wheel with Triton 2.51 is not installed")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(old_file)
    old = _field_paths(pool.FindMessageTypeByName("inference.ModelConfig"))
    new = _field_paths(model_config_pb2.ModelConfig.DESCRIPTOR)
    added = new - old
    newer = {path for path in added if path.rpartition(".")[0] not in added}
    assert newer == set(NEWER_FIELDS)


def test_report_as_dict_splits_errors_and_warnings():
    text = BASE.replace("dims: [ 4 ]", "dims: [ 1, 4 ]") + "version_policy { all { } }\n"
    report = check(text, model_name="other")
    as_dict = report.as_dict()
    assert as_dict["valid"] is False
    assert [e["field"] for e in as_dict["errors"]] == ["name"]
    assert [w["field"] for w in as_dict["warnings"]] == ["input[0].dims", "version_policy"]
    assert set(as_dict["errors"][0]) == {"severity", "message", "file", "line", "column", "field"}
    json.dumps(as_dict)


def test_config_to_dict_uses_the_proto_field_names():
    stored = config_to_dict(check(BASE).config)
    assert stored["max_batch_size"] == 8
    assert stored["input"][0]["data_type"] == "TYPE_FP32"
    json.dumps(stored)


def test_config_for_serving_sets_the_versions_and_push_id_on_a_copy():
    text = (EXAMPLES / "risk_score" / "config.pbtxt").read_text() + "version_policy { all { } }\n"
    config = validate_model_config(text, model_name="risk_score", version_files=["model.py"]).config
    payload = config_for_serving(config, versions=[4, 3], push_id="push-7")
    served = json_format.Parse(payload, model_config_pb2.ModelConfig())
    assert served.name == "risk_score"
    assert list(served.version_policy.specific.versions) == [3, 4]
    assert served.parameters["PUSH_ID"].string_value == "push-7"
    assert config.version_policy.HasField("all") and "PUSH_ID" not in config.parameters


def test_serving_json_uses_the_field_names_triton_load_accepts():
    text = (EXAMPLES / "risk_score" / "config.pbtxt").read_text()
    config = validate_model_config(text, model_name="risk_score", version_files=["model.py"]).config
    body = json.loads(config_for_serving(config, versions=[1]))
    assert body["input"][0]["name"] == "FEATURES"
    assert body["input"][0]["data_type"] == "TYPE_FP32"
    assert [int(d) for d in body["input"][0]["dims"]] == [128]
    assert body["max_batch_size"] == 64 and body["instance_group"][0]["kind"] == "KIND_CPU"
    assert body["version_policy"] == {"specific": {"versions": ["1"]}}  # uint64: strings
    assert "parameters" not in body


@pytest.mark.parametrize("versions", [[], [0], [-1, 2]])
def test_config_for_serving_refuses_versions_that_are_not_positive(versions):
    with pytest.raises(ValueError, match="positive"):
        config_for_serving(check(BASE).config, versions=versions)


def _with_warmup(text: str) -> tuple[model_config_pb2.ModelConfig, dict, dict]:
    config = check(text).config
    sample = generate_inputs(config_to_dict(config), batch_size=1, variable_dim=1)
    return config, sample, add_native_warmup(config, sample)


def test_native_warmup_is_the_push_request_as_raw_files_in_the_warmup_folder():
    text = BASE.replace("dims: [ 4 ]", "dims: [ 4, -1 ]") + (
        'input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 2 ] } ]\n'
    )
    config, sample, files = _with_warmup(text)
    (warmup,) = config.model_warmup
    assert (warmup.name, warmup.batch_size) == ("switchyard", 1)
    # Batch dim left out, the variable dim set to the sample's 1.
    assert list(warmup.inputs["IN"].dims) == [4, 1]
    assert warmup.inputs["IN"].data_type == model_config_pb2.TYPE_FP32
    assert warmup.inputs["TEXT"].input_data_file == "switchyard_1"
    assert files["warmup/switchyard_0"] == sample["IN"].astype("<f4").tobytes()
    words = sample["TEXT"].reshape(-1)
    assert files["warmup/switchyard_1"] == b"".join(len(w).to_bytes(4, "little") + w for w in words)
    assert all(words)  # real words, where Triton's zero_data would send empty strings


def test_native_warmup_of_a_model_without_batching_keeps_the_full_shape():
    config, _, files = _with_warmup(BASE.replace("max_batch_size: 8", "max_batch_size: 0"))
    assert list(config.model_warmup[0].inputs["IN"].dims) == [4]
    assert len(files["warmup/switchyard_0"]) == 4 * 4


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (
            'model_warmup [ { name: "own" batch_size: 1 inputs { key: "IN" value: '
            "{ data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]",
            "its own model_warmup",
        ),
        ("sequence_batching { }", "control inputs"),
        ("model_transaction_policy { decoupled: true }", "decoupled"),
    ],
)
def test_native_warmup_is_left_out_where_generated_inputs_cannot_do(extra, why):
    config, sample, files = _with_warmup(BASE + extra + "\n")
    assert why in native_warmup_skip_reason(config, sample)
    assert files == {} and len(config.model_warmup) == (1 if "own" in extra else 0)
