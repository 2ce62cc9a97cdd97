"""An upload's files read as untrusted code before any node sees them: shared libraries
refused, python model files parsed (never imported). The rules are in
integrations/triton/model_config/untrusted.py; this module feeds them the staged files."""

from __future__ import annotations

from django.conf import settings
from tritonclient.grpc.model_config_pb2 import ModelConfig

from integrations.triton.model_config import (
    ConfigIssue,
    backend_of,
    library_issues,
    python_calls_issues,
    python_model_issues,
)
from integrations.triton.model_config.graph import CALLS_PARAMETER
from models_registry.archive import ExtractedUpload
from models_registry.signals import custom_backends_wanted

HEAD_BYTES = 4  # enough for the ELF magic
# A python model file larger than this is refused unread (an ast of it would be huge).
MAX_PYTHON_BYTES = 8 * 1024 * 1024


def allowed_backends() -> set[str]:
    """The backends every cluster may run (SWITCHYARD_ALLOWED_BACKENDS)."""
    return set(settings.SWITCHYARD_ALLOWED_BACKENDS)


def custom_backends() -> set[str]:
    """The backends at least one cluster allows explicitly (asked of the apps above)."""
    found: set[str] = set()
    for _receiver, names in custom_backends_wanted.send(sender=ExtractedUpload):
        found.update(names or ())
    return found - allowed_backends()


def upload_code_issues(
    upload: ExtractedUpload, config: ModelConfig, *, custom: set[str]
) -> list[ConfigIssue]:
    """Errors for shared libraries among the files and for the python model file."""
    prefix = f"{upload.source_version_folder}/" if upload.source_version_folder else ""
    backend = backend_of(config.backend, config.platform)
    heads = [(f.path, _head(f.staged_at)) for f in upload.files]
    issues = library_issues(heads, backend=backend, custom=custom, prefix=prefix)
    if config.backend != "python":
        return issues
    name = config.default_model_filename or "model.py"
    staged = next((f for f in upload.files if f.path == name), None)
    if staged is None:
        return issues  # the config checks already refused a missing model file
    if staged.size > MAX_PYTHON_BYTES:
        message = f"{prefix}{name} is larger than {MAX_PYTHON_BYTES} bytes; refused unread."
        return [*issues, ConfigIssue("error", message, file=f"{prefix}{name}")]
    source, file = staged.staged_at.read_bytes(), f"{prefix}{name}"
    declared = CALLS_PARAMETER in config.parameters
    return [
        *issues,
        *python_model_issues(source, file=file),
        *python_calls_issues(source, file=file, declared=declared),
    ]


def _head(path) -> bytes:
    with open(path, "rb") as stream:
        return stream.read(HEAD_BYTES)
