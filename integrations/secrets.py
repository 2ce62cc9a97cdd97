"""References to secrets the operator keeps (a Triton cluster's node key): `env:NAME`,
`file:/path`. Values the control plane stores itself are sealed by core/sealed.py.

Plain Python: the caller passes the settings. Nothing here puts a secret's value into a
message, an exception or a repr.

* A reference may only name what the operator set aside for it: environment variables
  named REF_ENV_PREFIX..., files under the given folders. Anyone who may edit a cluster may
  set its reference, and the value is sent to the cluster's nodes: an unrestricted reference
  would hand out DJANGO_SECRET_KEY or any file the control plane can read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from core.sealed import SecretError
from integrations.paths import PathError, path_under_roots

REF_ENV_PREFIX = "SWITCHYARD_NODE_KEY"
_ENV_NAME_RE = re.compile(rf"^{REF_ENV_PREFIX}(_[A-Z0-9_]+)?$")
MAX_SECRET_BYTES = 4096

__all__ = ["SecretError", "check_ref", "resolve_ref"]


def check_ref(ref: object, *, file_roots: Iterable[str]) -> str:
    """The reference when it names an allowed variable or file, else SecretError."""
    if not isinstance(ref, str) or not ref:
        raise SecretError("A reference is 'env:NAME' or 'file:/absolute/path'.")
    kind, _, target = ref.partition(":")
    if kind == "env":
        if not _ENV_NAME_RE.match(target):
            raise SecretError(
                f"An env reference names a variable {REF_ENV_PREFIX} or {REF_ENV_PREFIX}_<NAME> "
                "(upper-case letters, digits, '_')."
            )
        return ref
    if kind == "file":
        try:
            path_under_roots(target, file_roots)
        except PathError as exc:
            raise SecretError(f"{exc} (SWITCHYARD_SECRET_FILE_ROOTS)") from None
        return ref
    raise SecretError("A reference is 'env:NAME' or 'file:/absolute/path'.")


def resolve_ref(ref: str, *, file_roots: Iterable[str]) -> str:
    """The value a reference points at now (a file's trailing newline dropped)."""
    check_ref(ref, file_roots=file_roots)
    kind, _, target = ref.partition(":")
    if kind == "env":
        value = os.environ.get(target)
        if value is None:
            raise SecretError(f"the environment variable {target} is not set")
        return value.strip()
    path = path_under_roots(target, file_roots)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise SecretError(
            f"{target} cannot be read ({exc.strerror or type(exc).__name__})"
        ) from None
    if len(data) > MAX_SECRET_BYTES:
        raise SecretError(f"{target} is larger than {MAX_SECRET_BYTES} bytes")
    try:
        return data.decode().strip()
    except UnicodeError:
        raise SecretError(f"{target} is not UTF-8 text") from None
