"""Safe, streaming extraction of an uploaded Triton model directory (.tar.gz or .zip).

One pass over the archive: every member is checked before any byte of it is written, and
written only into a private staging folder while being hashed. Any refusal discards the
staging folder, so nothing is left on disk. Accepted layouts (an optional single wrapping
folder is allowed around each):

    config.pbtxt + <N>/<files>         one numeric version folder
    config.pbtxt + <files>             the version's files at the top
"""

import gzip
import posixpath
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from models_registry.storage import StagedFile, Staging

CONFIG_NAME = "config.pbtxt"
MAX_CONFIG_BYTES = 1024 * 1024
# What a truncated or corrupt compressed member raises while it is read.
DAMAGED = (EOFError, zlib.error, gzip.BadGzipFile, zipfile.BadZipFile, tarfile.TarError)


class ArchiveRefused(Exception):
    """The archive cannot be registered; `file` names the member at fault when there is one."""

    def __init__(self, message: str, *, file: str | None = None):
        super().__init__(message)
        self.message = message
        self.file = file


@dataclass
class ExtractedUpload:
    config_text: str
    config: StagedFile
    files: list[StagedFile]  # paths relative to the version folder
    source_version_folder: str | None
    staging: Staging

    @property
    def all_files(self) -> list[StagedFile]:
        return [self.config, *self.files]


@dataclass(frozen=True)
class _Member:
    path: str
    is_dir: bool
    size: int
    open: object  # callable returning a binary stream, or None for dirs


def _safe_path(raw: str) -> str:
    if "\\" in raw or "\x00" in raw:
        raise ArchiveRefused(f"unsafe path {raw!r}: backslashes are not allowed", file=raw)
    if raw.startswith("/"):
        raise ArchiveRefused(f"absolute path {raw!r} is not allowed", file=raw)
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveRefused(f"path {raw!r} climbs out of the archive with '..'", file=raw)
    return "/".join(parts)


def _tar_members(fileobj: BinaryIO) -> Iterator[_Member]:
    try:
        with tarfile.open(fileobj=fileobj, mode="r:*") as tar:
            for info in tar:
                if info.issym() or info.islnk():
                    kind = "symbolic link" if info.issym() else "hard link"
                    raise ArchiveRefused(
                        f"{info.name!r} is a {kind}; links are not allowed", file=info.name
                    )
                if not (info.isreg() or info.isdir()):
                    raise ArchiveRefused(
                        f"{info.name!r} is a device, FIFO or other special file; "
                        "only regular files and folders are allowed",
                        file=info.name,
                    )
                opener = (lambda i=info: tar.extractfile(i)) if info.isreg() else None
                yield _Member(info.name, info.isdir(), info.size, opener)
    except DAMAGED as exc:
        raise ArchiveRefused(f"the archive is not a readable tar file: {exc}") from None


def _zip_members(fileobj: BinaryIO) -> Iterator[_Member]:
    try:
        archive = zipfile.ZipFile(fileobj)
    except zipfile.BadZipFile as exc:
        raise ArchiveRefused(f"the archive is not a readable zip file: {exc}") from None
    with archive:
        for info in archive.infolist():
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise ArchiveRefused(
                    f"{info.filename!r} is a symbolic link; links are not allowed",
                    file=info.filename,
                )
            # Only the type bits count: many zip writers set permissions alone.
            if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise ArchiveRefused(
                    f"{info.filename!r} is a special file; only regular files "
                    "and folders are allowed",
                    file=info.filename,
                )
            opener = None if info.is_dir() else (lambda i=info: archive.open(i))
            yield _Member(info.filename, info.is_dir(), info.file_size, opener)


def _members(fileobj: BinaryIO) -> Iterator[_Member]:
    head = fileobj.read(4)
    fileobj.seek(0)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _zip_members(fileobj)
    return _tar_members(fileobj)


def _stage_all(fileobj: BinaryIO, staging: Staging, *, max_files: int, max_bytes: int):
    """Stage every regular file under its safe path; returns ({path: StagedFile}, dirs)."""
    staged: dict[str, StagedFile] = {}
    dirs: set[str] = set()
    total = 0
    for member in _members(fileobj):
        path = _safe_path(member.path)
        if not path:
            continue
        if member.is_dir:
            dirs.add(path)
            continue
        if path in staged or path in dirs:
            raise ArchiveRefused(f"{path!r} appears twice in the archive", file=path)
        if len(staged) >= max_files:
            raise ArchiveRefused(f"the archive holds more than {max_files} files")
        try:
            with member.open() as stream:
                item = staging.write(stream, path=path, role="file", max_bytes=max_bytes - total)
        except OverflowError:
            raise ArchiveRefused(
                f"the archive unpacks to more than {max_bytes} bytes", file=path
            ) from None
        except DAMAGED as exc:
            raise ArchiveRefused(f"the archive is damaged at {path!r}: {exc}", file=path) from None
        total += item.size
        staged[path] = item
    return staged, dirs


def _strip_wrapper(paths: list[str]) -> str:
    """The single wrapping folder to remove, or '' when config.pbtxt is at the top."""
    if CONFIG_NAME in paths or not paths:
        return ""
    tops = {p.split("/", 1)[0] for p in paths}
    if len(tops) == 1 and all("/" in p for p in paths):
        top = tops.pop()
        if f"{top}/{CONFIG_NAME}" in paths:
            return top + "/"
    return ""


def _is_version_name(name: str) -> bool:
    return name.isdigit()


def _split_layout(paths: list[str]) -> tuple[str | None, list[str]]:
    """(version folder or None, version-relative paths); refuses ambiguous layouts."""
    others = [p for p in paths if p != CONFIG_NAME]
    top_files = [p for p in others if "/" not in p]
    folders = sorted({p.split("/", 1)[0] for p in others if "/" in p})
    if top_files:
        return None, others  # the version's files at the top (subfolders belong to it)
    numeric = [f for f in folders if _is_version_name(f)]
    non_numeric = [f for f in folders if not _is_version_name(f)]
    if non_numeric:
        name = non_numeric[0]
        raise ArchiveRefused(
            f"folder {name!r} is not a version folder: version folders are positive "
            "integers (e.g. 1/model.py)",
            file=name,
        )
    if len(numeric) > 1:
        raise ArchiveRefused(
            f"the archive holds {len(numeric)} version folders ({', '.join(numeric)}): "
            "upload one version at a time"
        )
    if not numeric:
        raise ArchiveRefused(
            "no version files: add a version folder (e.g. 1/model.py) or "
            "the version's files next to config.pbtxt"
        )
    folder = numeric[0]
    if folder.startswith("0"):
        raise ArchiveRefused(
            f"version folder {folder!r} has a leading zero or is zero; Triton ignores it",
            file=folder,
        )
    prefix = folder + "/"
    return folder, [p[len(prefix) :] for p in others]


def _read_config(staged: StagedFile) -> str:
    if staged.size > MAX_CONFIG_BYTES:
        raise ArchiveRefused("config.pbtxt is larger than 1 MiB", file=CONFIG_NAME)
    try:
        return staged.staged_at.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ArchiveRefused("config.pbtxt is not UTF-8 text", file=CONFIG_NAME) from None


def extract_upload(fileobj: BinaryIO, *, max_files: int, max_bytes: int) -> ExtractedUpload:
    """Check and stage an uploaded model directory; raises ArchiveRefused, leaving nothing."""
    staging = Staging()
    try:
        staged, dirs = _stage_all(fileobj, staging, max_files=max_files, max_bytes=max_bytes)
        if not staged:
            raise ArchiveRefused("the archive is empty")
        wrapper = _strip_wrapper(list(staged))
        relative = {p[len(wrapper) :]: s for p, s in staged.items() if p.startswith(wrapper)}
        if len(relative) != len(staged):
            raise ArchiveRefused("files outside the model folder: put everything in one folder")
        if CONFIG_NAME not in relative:
            raise ArchiveRefused("the archive has no config.pbtxt at its top level")
        folder, version_paths = _split_layout(list(relative))
        prefix = f"{folder}/" if folder else ""
        files = [_relabel(relative[prefix + p], p) for p in sorted(version_paths)]
        config = _relabel(relative[CONFIG_NAME], CONFIG_NAME, role="config")
        return ExtractedUpload(_read_config(config), config, files, folder, staging)
    except BaseException:
        staging.discard()
        raise


def _relabel(staged: StagedFile, path: str, role: str = "file") -> StagedFile:
    return StagedFile(
        path=path, role=role, size=staged.size, sha256=staged.sha256, staged_at=staged.staged_at
    )


def join_version_path(version: int, path: str) -> str:
    return posixpath.join(str(version), path)
