"""Folders the control plane writes to and removes from: only under roots the operator set.

Plain Python. A path reached through the API (a cluster's model repository, a router's
prefix folder) is resolved (symlinks and `..` included) and must lie in one of the roots,
both when it is stored and again right before files are written or removed there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

MAX_PATH_LENGTH = 400


class PathError(ValueError):
    """A folder outside every allowed root, or not a plain absolute path."""


def path_under_roots(path: object, roots: Iterable[str | os.PathLike]) -> Path:
    """The resolved path when it lies in (or is) one of `roots`; PathError otherwise."""
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise PathError("Must be a non-empty absolute path.")
    text = str(path)
    if len(text) > MAX_PATH_LENGTH or "\x00" in text or not os.path.isabs(text):
        raise PathError(f"{text!r} must be an absolute path of at most {MAX_PATH_LENGTH} chars.")
    resolved = Path(os.path.realpath(text))
    allowed = [Path(os.path.realpath(root)) for root in roots]
    if not any(resolved == root or root in resolved.parents for root in allowed):
        names = ", ".join(str(root) for root in allowed) or "none configured"
        raise PathError(f"{text!r} is outside the allowed folders ({names}).")
    return resolved
