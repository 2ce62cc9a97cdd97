"""Content-addressed, immutable file storage for model versions.

Layout under the storage root: `blobs/sha256/<ab>/<full hex>` for content, `staging/<id>/` for
uploads being checked. A blob is written once (temp file, fsync, rename) and never changed.
"""

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

CHUNK = 1024 * 1024


def storage_root() -> Path:
    return Path(settings.SWITCHYARD_STORAGE_ROOT)


def blob_path(sha256: str) -> Path:
    return storage_root() / "blobs" / "sha256" / sha256[:2] / sha256


@dataclass(frozen=True)
class StagedFile:
    path: str  # relative path inside the upload's version folder (or "config.pbtxt")
    role: str  # "config" | "file"
    size: int
    sha256: str
    staged_at: Path


class Staging:
    """A private folder for one upload; `discard()` leaves nothing behind."""

    def __init__(self) -> None:
        self.root = storage_root() / "staging" / uuid.uuid4().hex
        self.root.mkdir(parents=True)
        self._count = 0

    def write(self, source: BinaryIO, *, path: str, role: str, max_bytes: int) -> StagedFile:
        """Stream `source` to a staged file while hashing it; refuse past max_bytes."""
        self._count += 1
        target = self.root / f"{self._count:06d}"
        digest, size = hashlib.sha256(), 0
        with open(target, "wb") as out:
            while chunk := source.read(CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise OverflowError(path)
                digest.update(chunk)
                out.write(chunk)
        return StagedFile(
            path=path, role=role, size=size, sha256=digest.hexdigest(), staged_at=target
        )

    def commit(self, files: list[StagedFile]) -> list[Path]:
        """Move staged files into the blob store; returns the blobs that are new."""
        created = []
        for staged in files:
            target = blob_path(staged.sha256)
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(staged.staged_at, "rb") as handle:
                os.fsync(handle.fileno())
            os.chmod(staged.staged_at, 0o444)
            os.replace(staged.staged_at, target)
            created.append(target)
        return created

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def blob_remove(paths: list[Path]) -> None:
    """Undo a commit whose database write failed (only blobs that commit created)."""
    for path in paths:
        path.unlink(missing_ok=True)


def blob_open(sha256: str) -> BinaryIO:
    return open(blob_path(sha256), "rb")


def blob_verify(sha256: str) -> bool:
    """Re-hash a stored blob; True when its content still matches its name."""
    digest = hashlib.sha256()
    with blob_open(sha256) as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest() == sha256


def blob_chunks(sha256: str) -> Iterator[bytes]:
    with blob_open(sha256) as handle:
        yield from iter(lambda: handle.read(CHUNK), b"")


def manifest_digest(manifest: list[dict]) -> str:
    """sha256 over the sorted manifest lines `role\\tpath\\tsize\\tsha256`."""
    lines = sorted(f"{e['role']}\t{e['path']}\t{e['size']}\t{e['sha256']}\n" for e in manifest)
    return hashlib.sha256("".join(lines).encode()).hexdigest()
