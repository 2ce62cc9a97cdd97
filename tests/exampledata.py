"""Load the example models from examples/model_repository the way an upload push does:
the config as JSON (version policy set by us) plus every file as `file:<version>/<path>`."""

from pathlib import Path

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "model_repository"


def example_config_json(model: str, *, name: str, versions: list[int]) -> str:
    config = model_config_pb2.ModelConfig()
    text_format.Parse((EXAMPLES / model / "config.pbtxt").read_text(), config)
    config.name = name
    config.version_policy.specific.versions[:] = versions
    return json_format.MessageToJson(config, preserving_proto_field_name=True)


def example_files(model: str, version: int) -> dict[str, bytes]:
    folder = EXAMPLES / model / str(version)
    return {
        f"file:{version}/{path.relative_to(folder).as_posix()}": path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
