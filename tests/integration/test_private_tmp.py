"""A local node's own /tmp for a user without CAP_SYS_ADMIN (a demo run as a normal user):
the launcher's child set-up (`PrivateTmp.enter`) enters a user namespace of its own, where
its ids map to themselves, and /tmp is the node's folder there too. On the real kernel: a
child forked here drops to nobody (65534) before the set-up, as a normal user's launcher
would start it. tests/integration/test_triton_local.py covers the root path with Triton."""

import contextlib
import json
import os
import secrets
import tempfile
from pathlib import Path

import pytest

from integrations.triton import private_tmp
from integrations.triton.private_tmp import PrivateTmp

NOBODY = 65534
TMP = private_tmp.TMP
PR_SET_DUMPABLE = 4
UPLOAD = f"folder{secrets.token_hex(3)}"  # a name as Triton gives its upload folders


def _child(tmp: PrivateTmp, report: int, release: int, dumpable: bool) -> None:
    """In the forked child: become nobody, enter, report what it sees, wait to be released."""
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    # A process started as nobody is dumpable (its /proc/self files are its own); one that
    # changed its ids from root is not until it says so.
    if dumpable:
        private_tmp.LIBC.prctl(PR_SET_DUMPABLE, 1)
    tmp.enter(private_tmp.LIBC)
    inside = os.stat(TMP)
    Path(TMP, UPLOAD).mkdir()
    seen = {
        "tmp": [inside.st_dev, inside.st_ino],
        "entries": sorted(os.listdir(TMP)),
        "uid": os.getuid(),
        "gid": os.getgid(),
    }
    os.write(report, json.dumps(seen).encode())
    os.close(report)
    os.read(release, 1)


def _fork_as_nobody(tmp: PrivateTmp, dumpable: bool = True) -> tuple[int, dict, int]:
    """(pid, what the child saw, the fd that releases it)."""
    report_r, report_w = os.pipe()
    release_r, release_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.close(report_r)
            os.close(release_w)
            _child(tmp, report_w, release_r, dumpable)
            code = 0
        finally:
            os._exit(code)
    os.close(report_w)
    os.close(release_r)
    with os.fdopen(report_r, "rb") as answer:
        text = answer.read()
    return pid, json.loads(text) if text else {}, release_w


@pytest.fixture
def node_home():
    """A node's folder nobody owns, planned as local.py plans it (its command line names a
    folder inside it), and a host /tmp entry the node must not see; all removed after."""
    home = Path(tempfile.mkdtemp(prefix="switchyard-userns-"))
    marker = Path(tempfile.mkdtemp(prefix="switchyard-host-"))
    try:
        tmp = PrivateTmp.plan(home / "tmp", [str(home / "repository")], {}, home)
        for path in (home, home / "tmp"):
            os.chown(path, NOBODY, NOBODY)
        yield home, tmp, marker
    finally:
        marker.rmdir()
        for path in sorted(home.rglob("*"), reverse=True):
            path.rmdir()
        home.rmdir()
        with contextlib.suppress(FileNotFoundError):
            Path(TMP, UPLOAD).rmdir()  # where a child that kept the host's /tmp made it


def _ended(pid: int, release: int) -> int:
    os.close(release)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(os.geteuid() != 0, reason="the test drops to another user: needs root")
def test_without_cap_sys_admin_a_node_gets_its_own_tmp_through_a_user_namespace(node_home):
    home, tmp, marker = node_home
    own = os.stat(home / "tmp")
    pid, seen, release = _fork_as_nobody(tmp)
    try:
        assert seen, "the child failed before it reported"
        assert seen["tmp"] == [own.st_dev, own.st_ino]  # /tmp is the node's folder
        assert seen["uid"] == NOBODY and seen["gid"] == NOBODY  # its ids, mapped to themselves
        # Only the entry its command line names is bound in: not the host's other entries.
        assert home.name in seen["entries"] and marker.name not in seen["entries"]
        assert tmp.serves(pid)  # the launcher tells it entered (local.py keeps the tmp then)
        folder = home / "tmp" / UPLOAD
        assert folder.is_dir() and folder.stat().st_uid == NOBODY
        assert not Path(TMP, UPLOAD).exists()  # never in the host's /tmp
    finally:
        assert _ended(pid, release) == 0
    tmp.clean()
    assert not folder.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the test drops to another user: needs root")
def test_a_process_that_may_not_map_its_ids_keeps_the_host_tmp_and_still_starts(node_home):
    """Not dumpable (it changed its ids from root's itself): no user namespace and nothing
    half-done; the node runs with the host's /tmp, as before (local.py then removes the
    upload folders its stubs name)."""
    _, tmp, _ = node_home
    host = os.stat(TMP)
    pid, seen, release = _fork_as_nobody(tmp, dumpable=False)
    try:
        assert seen, "the child failed before it reported"
        assert seen["tmp"] == [host.st_dev, host.st_ino]
        assert not tmp.serves(pid)
    finally:
        assert _ended(pid, release) == 0
