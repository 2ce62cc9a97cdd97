"""A local node's own /tmp: a mount namespace in which /tmp is a folder of the node's.

Triton writes every model loaded by upload into `/tmp/folderXXXXXX` (a fixed path: TMPDIR is
not read, docs/TRITON.md). It removes the folder when the model unloads or the server exits
cleanly, but a killed server leaves its folders, and a load that keeps an older version's
python stub makes folders that no process names, so nothing outside Triton can tell whose
they are. In a namespace of its own the node's /tmp is `<node>/tmp`: every such folder lives
in the node's folder and goes with it, and model code sees no other /tmp entry.

Inside, /tmp holds only the top-level /tmp entries that the node's command line, environment
and working folder name (the repository, the backends, the virtualenv when it lives in /tmp),
bound in as they are, so writes to them on either side are seen on the other.

Entering a mount namespace needs CAP_SYS_ADMIN: root has it (as the suite runs in CI); any
other user gets it inside a user namespace of the node's own, where the launcher's user id
and group id map to themselves (files keep their owners, the node runs as that user). Where
neither is allowed (a kernel or sandbox that refuses unprivileged user namespaces) the node
runs in the launcher's namespace, as before, and its folders are removed by what its stubs
name (integrations/triton/local.py). Linux only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

TMP = "/tmp"  # noqa: S108 - the path Triton writes to, replaced inside the namespace
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_GET_DUMPABLE = 3
UPLOAD_NAME = re.compile(r"^folder[A-Za-z0-9]{6}$")  # Triton's own names


def _libc() -> ctypes.CDLL | None:
    """libc with unshare, mount and umount2 typed, loaded in the launcher (never after fork)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.unshare.argtypes = [ctypes.c_int]
        libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
        libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


def _top_level_entries(values: Iterable[str]) -> tuple[str, ...]:
    """The /tmp entries that these paths (or PATH-like lists, or `--flag=path`) start in."""
    found = set()
    for value in values:
        for part in re.split(r"[=:]", value):
            if part.startswith(TMP + "/"):
                entry = part[len(TMP) + 1 :].split("/", 1)[0]
                if entry and entry not in (".", ".."):
                    found.add(entry)
    return tuple(sorted(found))


def _own_user_namespace(libc: ctypes.CDLL) -> bool:
    """In the child, without CAP_SYS_ADMIN: new user and mount namespaces, this process's
    user and group ids mapped to themselves. False where the kernel refuses them, or where
    this process may not write its own id maps (not dumpable: it changed its ids from
    root's itself), with nothing changed then; a refused id map after that raises OSError,
    which fails the node's start: a process whose own id is unmapped could not read its own
    files."""
    uid, gid = os.getuid(), os.getgid()
    if libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1:
        return False
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return False
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    return True


@dataclass(frozen=True)
class PrivateTmp:
    """The host folder that is the node's /tmp, and the host /tmp entries bound into it."""

    folder: Path
    keep: tuple[str, ...]

    @classmethod
    def plan(
        cls, folder: Path, argv: Iterable[str], env: Mapping[str, str], cwd: Path
    ) -> PrivateTmp:
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder, _top_level_entries([*argv, *env.values(), str(cwd)]))

    def enter(self, libc: ctypes.CDLL | None) -> None:
        """In the child, before exec: a mount namespace whose /tmp is `folder`. Any refusal
        leaves the child with the host's /tmp (`serves` tells the launcher which)."""
        if libc is None:
            return
        if libc.unshare(CLONE_NEWNS) != 0 and not _own_user_namespace(libc):
            return
        # Private first: a mount made while the copy still shares propagation would show up
        # on the host too.
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            return
        try:
            host_tmp = os.open(TMP, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            if libc.mount(os.fsencode(self.folder), TMP.encode(), None, MS_BIND, None) != 0:
                return
            if not self._bind_kept(libc, host_tmp):
                libc.umount2(TMP.encode(), MNT_DETACH)  # back to the host's /tmp whole
        finally:
            os.close(host_tmp)

    def _bind_kept(self, libc: ctypes.CDLL, host_tmp: int) -> bool:
        for entry in self.keep:
            source = f"/proc/self/fd/{host_tmp}/{entry}".encode()
            target = f"{TMP}/{entry}"
            try:
                os.makedirs(target, 0o700, exist_ok=True)
            except OSError:
                return False
            if libc.mount(source, target.encode(), None, MS_BIND | MS_REC, None) != 0:
                return False
        return True

    def serves(self, pid: int) -> bool:
        """True when process `pid`'s /tmp is this folder (it entered its namespace)."""
        try:
            inside, own = os.stat(f"/proc/{pid}/root{TMP}"), os.stat(self.folder)
        except OSError:
            return False
        return (inside.st_dev, inside.st_ino) == (own.st_dev, own.st_ino)

    def upload_folder(self, inside: str) -> str:
        """The host path of an upload folder named inside the namespace."""
        name = inside[len(TMP) + 1 :]
        return str(self.folder / name) if UPLOAD_NAME.match(name) else inside

    def clean(self) -> None:
        """After every process of the node is gone: remove its upload folders and the empty
        mount points (never recursively: a mount point is only removed when empty)."""
        with contextlib.suppress(OSError):
            for child in self.folder.iterdir():
                if UPLOAD_NAME.match(child.name) and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
        for entry in self.keep:
            with contextlib.suppress(OSError):
                (self.folder / entry).rmdir()


LIBC = _libc()
