"""Folders the control plane writes to and removes from: only under roots the operator set.

Plain Python. A path reached through the API (a cluster's model repository, a router's
prefix folder) is resolved (symlinks and `..` included) and must lie in one of the roots,
both when it is stored and again right before files are written or removed there; the
writes and removals themselves go through `SafeDir`, which opens every folder on the way
by descriptor without following symbolic links (race-safe against a link planted by
anyone else who can write to the folder, such as model code on a node sharing it).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
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


def is_plain_name(name: object) -> bool:
    """A single folder or file name: no separator, not '.' or '..', no NUL."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\x00" not in name
        and len(name) <= 255
    )


def _refused(path: str, exc: OSError) -> PathError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return PathError(f"{path!r} is a symbolic link or not a folder: refused.")
    return PathError(f"{path!r}: {exc.strerror or exc}.")


class SafeDir:
    """A folder held open by descriptor; every step below it is taken relative to that
    descriptor and never through a symbolic link (O_NOFOLLOW), so nothing planted in the
    folder (a link at any depth) can lead a write or a removal outside it."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path = fd, path

    @classmethod
    def open_under(cls, path: object, roots: Iterable[str | os.PathLike]) -> SafeDir:
        """The folder `path` once checked under `roots`, opened component by component from
        `/` without following a link (a link swapped in after the check is refused)."""
        resolved = path_under_roots(path, roots)
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        folder = cls(fd, "/")
        try:
            for part in resolved.parts[1:]:
                folder = folder._step(part, create=False, close_parent=True)
        except BaseException:
            folder.close()
            raise
        return folder

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _where(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _step(self, name: str, *, create: bool, close_parent: bool = False) -> SafeDir:
        if not is_plain_name(name):
            raise PathError(f"{name!r} is not a plain folder name.")
        where = self._where(name)
        if create:
            try:
                os.mkdir(name, 0o777, dir_fd=self.fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise _refused(where, exc) from None
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            fd = os.open(name, flags, dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _refused(where, exc) from None
        if close_parent:
            self.close()
        return SafeDir(fd, where)

    def child(self, relpath: str, *, create: bool = True) -> SafeDir:
        """The folder at `relpath` ('a/b'), made when missing and `create`; PathError on a
        link or a non-folder on the way, FileNotFoundError when missing."""
        return self._step_first(relpath.split("/"), create=create)

    def _step_first(self, parts: list[str], *, create: bool) -> SafeDir:
        folder = self._step(parts[0], create=create)
        try:
            for part in parts[1:]:
                folder = folder._step(part, create=create, close_parent=True)
        except BaseException:
            folder.close()
            raise
        return folder

    def _parent_of(self, relpath: str) -> tuple[SafeDir | None, str]:
        """(an opened parent folder, or None for this one; the last name)."""
        *folders, name = relpath.split("/")
        if not is_plain_name(name):
            raise PathError(f"{self._where(relpath)!r} is not a plain file name.")
        return (self._step_first(folders, create=True) if folders else None), name

    def write(self, relpath: str, data: bytes) -> None:
        """Write a file at `relpath` (folders made on the way); a link there is refused."""
        parent, name = self._parent_of(relpath)
        target = parent or self
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        try:
            fd = os.open(name, flags, 0o666, dir_fd=target.fd)
        except OSError as exc:
            raise _refused(target._where(name), exc) from None
        finally:
            if parent is not None:
                parent.close()
        with os.fdopen(fd, "wb") as out:
            out.write(data)

    def read(self, relpath: str) -> bytes | None:
        """The file at `relpath`, None when it (or a folder on the way) is missing; a link on
        the way is refused."""
        *folders, name = relpath.split("/")
        try:
            parent = self._step_first(folders, create=False) if folders else None
        except FileNotFoundError:
            return None
        target = parent or self
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=target.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refused(target._where(name), exc) from None
        finally:
            if parent is not None:
                parent.close()
        with os.fdopen(fd, "rb") as source:
            return source.read()

    def _refuse_link(self, name: str) -> bool:
        """True when `name` exists here; PathError when it is a symbolic link."""
        try:
            mode = os.lstat(name, dir_fd=self.fd).st_mode
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(mode):
            raise PathError(f"{self._where(name)!r} is a symbolic link: refused.")
        return True

    def remove_tree(self, name: str) -> None:
        """Remove the folder `name` here (nothing when missing; a link is refused, never
        followed, at any depth)."""
        if not is_plain_name(name):
            raise PathError(f"{name!r} is not a plain folder name.")
        if self._refuse_link(name):
            shutil.rmtree(name, dir_fd=self.fd)

    def replace(self, source: str, target: str) -> None:
        """Rename `source` over `target` in this folder (atomic); a link at `target` is
        refused rather than replaced."""
        for name in (source, target):
            if not is_plain_name(name):
                raise PathError(f"{name!r} is not a plain name.")
        self._refuse_link(target)
        os.replace(source, target, src_dir_fd=self.fd, dst_dir_fd=self.fd)
