"""Safe, streaming extraction of an uploaded Triton model directory (.tar.gz or .zip).

One pass over the archive: every member is checked before any byte of it is written, and
written only into a private staging folder while being hashed. Any refusal discards the
staging folder, so nothing is left on disk. Accepted layouts (an optional single wrapping
folder is allowed around each):

    config.pbtxt + <N>/<files>         one numeric version folder
    config.pbtxt + <files>             the version's files at the top
"""

import gzip
import os
import posixpath
import re
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
# Tar headers whose content tarfile reads whole into memory (GNU long names, pax records).
EXTENSION_TYPES = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)
# Extension headers in a row before a member (tarfile follows them by recursion).
MAX_HEADER_CHAIN = 8
# All extension headers of one archive together, in multiples of the per-header limit.
HEADER_TOTAL_FACTOR = 16
# Zip methods whose decompressor is bounded per read (bzip2 and lzma members are not).
ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
ZIP_CENTRAL_HEADER_BYTES = 46


class ArchiveRefused(Exception):
    """The archive cannot be registered; `file` names the member at fault when there is one."""

    def __init__(self, message: str, *, file: str | None = None):
        super().__init__(message)
        self.message = message
        self.file = file


@dataclass(frozen=True)
class ArchiveLimits:
    """What one upload may unpack to; checked before tarfile or zipfile reads past them."""

    max_entries: int  # files and folders
    max_unpacked_bytes: int
    max_ratio: float  # unpacked bytes per byte of the archive
    max_header_bytes: int  # one tar extension header, one zip member's name and extras

    def unpacked_budget(self, archive_bytes: int) -> int:
        return min(self.max_unpacked_bytes, int(self.max_ratio * max(archive_bytes, 1)))

    def too_big(self, archive_bytes: int) -> str:
        if self.unpacked_budget(archive_bytes) < self.max_unpacked_bytes:
            return (
                f"the archive unpacks to more than {self.max_ratio:g} times its own size "
                f"({archive_bytes} bytes): refused as a compression bomb"
            )
        return f"the archive unpacks to more than {self.max_unpacked_bytes} bytes"


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


class _HeaderBudget:
    """Refuses tar extension headers before tarfile reads them: too big, too many in a row,
    or too much in all."""

    def __init__(self, limit: int) -> None:
        self.limit, self.total, self.chain = limit, 0, 0

    def check(self, info: tarfile.TarInfo) -> None:
        if info.type == tarfile.GNUTYPE_SPARSE:
            raise ArchiveRefused(f"{info.name!r} is a sparse file; not allowed", file=info.name)
        if info.type not in EXTENSION_TYPES:
            self.chain = 0
            return
        self.chain += 1
        self.total += info.size
        if info.size > self.limit:
            raise ArchiveRefused(
                f"a tar extension header (long name or pax record) of {info.size} bytes is "
                f"over the limit of {self.limit} bytes"
            )
        if self.chain > MAX_HEADER_CHAIN or self.total > HEADER_TOTAL_FACTOR * self.limit:
            raise ArchiveRefused("the archive's tar extension headers are too many or too big")


def _guarded_tarinfo(budget: _HeaderBudget) -> type[tarfile.TarInfo]:
    """A TarInfo class whose headers pass `budget` before tarfile processes them."""

    def refuse_sparse(self, *args) -> None:
        raise ArchiveRefused(f"{self.name!r} is a sparse file; not allowed", file=self.name)

    class GuardedTarInfo(tarfile.TarInfo):
        def _proc_member(self, tarfile):
            budget.check(self)
            return super()._proc_member(tarfile)

        _proc_gnusparse_00 = _proc_gnusparse_01 = _proc_gnusparse_10 = refuse_sparse

    return GuardedTarInfo


def _tar_members(fileobj: BinaryIO, limits: ArchiveLimits) -> Iterator[_Member]:
    tarinfo = _guarded_tarinfo(_HeaderBudget(limits.max_header_bytes))
    try:
        with tarfile.open(fileobj=fileobj, mode="r:*", tarinfo=tarinfo) as tar:
            while (info := tar.next()) is not None:
                tar.members.clear()  # keep no member (nor its pax records) once checked
                _check_tar_type(info)
                opener = (lambda i=info: tar.extractfile(i)) if info.isreg() else None
                yield _Member(info.name, info.isdir(), info.size, opener)
    except DAMAGED as exc:
        raise ArchiveRefused(f"the archive is not a readable tar file: {exc}") from None
    except RecursionError:
        raise ArchiveRefused("the archive's tar headers nest too deeply") from None


def _check_tar_type(info: tarfile.TarInfo) -> None:
    if info.issym() or info.islnk():
        kind = "symbolic link" if info.issym() else "hard link"
        raise ArchiveRefused(f"{info.name!r} is a {kind}; links are not allowed", file=info.name)
    if not (info.isreg() or info.isdir()):
        raise ArchiveRefused(
            f"{info.name!r} is a device, FIFO or other special file; "
            "only regular files and folders are allowed",
            file=info.name,
        )


def _zip_precheck(fileobj: BinaryIO, limits: ArchiveLimits) -> None:
    """Refuse a zip whose central directory is too big before zipfile reads it whole."""
    # zipfile's own reader of the end record (stable since Python 2): entries and size.
    end = zipfile._EndRecData(fileobj)
    fileobj.seek(0)
    if end is None:
        return  # zipfile.ZipFile reports the damage
    entries, size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]
    if entries > limits.max_entries:
        raise ArchiveRefused(f"the archive holds more than {limits.max_entries} files and folders")
    if size > entries * (ZIP_CENTRAL_HEADER_BYTES + limits.max_header_bytes):
        raise ArchiveRefused("the zip's central directory is larger than its entries need")


def _check_zip_info(info: zipfile.ZipInfo, limits: ArchiveLimits) -> None:
    mode = info.external_attr >> 16
    name = info.filename
    if stat.S_ISLNK(mode):
        raise ArchiveRefused(f"{name!r} is a symbolic link; links are not allowed", file=name)
    # Only the type bits count: many zip writers set permissions alone.
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ArchiveRefused(
            f"{name!r} is a special file; only regular files and folders are allowed", file=name
        )
    if info.compress_type not in ZIP_METHODS:
        raise ArchiveRefused(
            f"{name!r} is compressed with method {info.compress_type}; "
            "only stored and deflated members are allowed",
            file=name,
        )
    if len(info.filename) + len(info.extra) + len(info.comment) > limits.max_header_bytes:
        raise ArchiveRefused(f"{name!r} has a header over {limits.max_header_bytes} bytes")


def _zip_members(fileobj: BinaryIO, limits: ArchiveLimits) -> Iterator[_Member]:
    _zip_precheck(fileobj, limits)
    try:
        archive = zipfile.ZipFile(fileobj)
    except zipfile.BadZipFile as exc:
        raise ArchiveRefused(f"the archive is not a readable zip file: {exc}") from None
    with archive:
        infos = archive.infolist()
        for info in infos:
            _check_zip_info(info, limits)
        # Declared sizes bound what zipfile yields (it stops there and checks the CRC).
        archive_bytes = _size_of(fileobj)
        if sum(i.file_size for i in infos) > limits.unpacked_budget(archive_bytes):
            raise ArchiveRefused(limits.too_big(archive_bytes))
        for info in infos:
            opener = None if info.is_dir() else (lambda i=info: archive.open(i))
            yield _Member(info.filename, info.is_dir(), info.file_size, opener)


def _size_of(fileobj: BinaryIO) -> int:
    position = fileobj.tell()
    size = fileobj.seek(0, os.SEEK_END)
    fileobj.seek(position)
    return size


def _members(fileobj: BinaryIO, limits: ArchiveLimits) -> Iterator[_Member]:
    head = fileobj.read(4)
    fileobj.seek(0)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _zip_members(fileobj, limits)
    return _tar_members(fileobj, limits)


def _stage_all(fileobj: BinaryIO, staging: Staging, limits: ArchiveLimits):
    """Stage every regular file under its safe path; returns ({path: StagedFile}, dirs)."""
    staged: dict[str, StagedFile] = {}
    dirs: set[str] = set()
    archive_bytes = _size_of(fileobj)
    budget = limits.unpacked_budget(archive_bytes)
    total = entries = 0
    for member in _members(fileobj, limits):
        entries += 1  # folders too: each costs tarfile a header and us a set entry
        if entries > limits.max_entries:
            raise ArchiveRefused(
                f"the archive holds more than {limits.max_entries} files and folders"
            )
        path = _safe_path(member.path)
        if not path:
            continue
        if member.is_dir:
            dirs.add(path)
            continue
        if path in staged or path in dirs:
            raise ArchiveRefused(f"{path!r} appears twice in the archive", file=path)
        staged[path] = _stage_one(member, path, staging, budget - total, limits, archive_bytes)
        total += staged[path].size
    return staged, dirs


def _stage_one(member, path, staging, left: int, limits, archive_bytes) -> StagedFile:
    try:
        with member.open() as stream:
            return staging.write(stream, path=path, role="file", max_bytes=left)
    except OverflowError:
        raise ArchiveRefused(limits.too_big(archive_bytes), file=path) from None
    except DAMAGED as exc:
        raise ArchiveRefused(f"the archive is damaged at {path!r}: {exc}", file=path) from None


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


# An ensemble's version is its config alone: Triton runs its steps, no file of its own (the
# config's checks, integrations/triton/model_config/checks.py, hold it to a real ensemble).
_ENSEMBLE = re.compile(r"""^\s*platform\s*:\s*["']ensemble["']""", re.MULTILINE)


def _split_layout(
    paths: list[str], *, files_optional: bool = False
) -> tuple[str | None, list[str]]:
    """(version folder or None, version-relative paths); refuses ambiguous layouts, and a
    version without files unless `files_optional` (an ensemble's: version 1 then)."""
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
    if not numeric and files_optional:
        return None, []
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


def extract_upload(fileobj: BinaryIO, *, limits: ArchiveLimits) -> ExtractedUpload:
    """Check and stage an uploaded model directory; raises ArchiveRefused, leaving nothing."""
    staging = Staging()
    try:
        staged, dirs = _stage_all(fileobj, staging, limits)
        if not staged:
            raise ArchiveRefused("the archive is empty")
        wrapper = _strip_wrapper(list(staged))
        relative = {p[len(wrapper) :]: s for p, s in staged.items() if p.startswith(wrapper)}
        if len(relative) != len(staged):
            raise ArchiveRefused("files outside the model folder: put everything in one folder")
        if CONFIG_NAME not in relative:
            raise ArchiveRefused("the archive has no config.pbtxt at its top level")
        config = _relabel(relative[CONFIG_NAME], CONFIG_NAME, role="config")
        text = _read_config(config)
        folder, version_paths = _split_layout(
            list(relative), files_optional=bool(_ENSEMBLE.search(text))
        )
        prefix = f"{folder}/" if folder else ""
        files = [_relabel(relative[prefix + p], p) for p in sorted(version_paths)]
        return ExtractedUpload(text, config, files, folder, staging)
    except BaseException:
        staging.discard()
        raise


def _relabel(staged: StagedFile, path: str, role: str = "file") -> StagedFile:
    return StagedFile(
        path=path, role=role, size=staged.size, sha256=staged.sha256, staged_at=staged.staged_at
    )


def join_version_path(version: int, path: str) -> str:
    return posixpath.join(str(version), path)
