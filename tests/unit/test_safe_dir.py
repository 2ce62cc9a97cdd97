"""SafeDir: every step below an opened folder refuses a symbolic link, wherever it is."""

import os

import pytest

from integrations.paths import PathError, SafeDir


@pytest.fixture
def tree(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (outside / "keep").write_bytes(b"keep")
    return root, outside


def test_writes_reads_replaces_and_removes_inside(tree):
    root, _ = tree
    with SafeDir.open_under(root, [root]) as folder:
        folder.write("real/a/b.txt", b"x")
        assert folder.read("real/a/b.txt") == b"x"
        assert folder.read("real/missing/b.txt") is None
        with folder.child("real") as real:
            real.write("tmp", b"y")
            real.replace("tmp", "c.txt")
            real.remove_tree("a")
    assert sorted(p.name for p in (root / "real").iterdir()) == ["c.txt"]


@pytest.mark.parametrize("where", ["link", "real/link"])
def test_a_link_on_the_way_is_refused_and_nothing_outside_changes(tree, where):
    root, outside = tree
    os.symlink(outside, root / where)
    with SafeDir.open_under(root, [root]) as folder:
        for step in (
            lambda: folder.write(f"{where}/new.txt", b"x"),
            lambda: folder.read(f"{where}/keep"),
            lambda: folder.child(where),
        ):
            with pytest.raises(PathError, match="symbolic link"):
                step()
        parent, _, name = where.rpartition("/")
        with folder.child(parent) if parent else SafeDir.open_under(root, [root]) as at:
            with pytest.raises(PathError, match="symbolic link"):
                at.remove_tree(name)
            at.write("tmp", b"z")
            with pytest.raises(PathError, match="symbolic link"):
                at.replace("tmp", name)
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert (outside / "keep").read_bytes() == b"keep"


def test_a_folder_swapped_for_a_link_after_the_check_is_refused(tree):
    root, outside = tree
    with SafeDir.open_under(root, [root]) as folder:
        (root / "real").rmdir()
        os.symlink(outside, root / "real")  # planted after the repository was opened
        with pytest.raises(PathError):
            folder.write("real/x", b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]


def test_the_folder_itself_must_lie_under_the_roots(tree, tmp_path):
    root, outside = tree
    with pytest.raises(PathError, match="outside the allowed folders"):
        SafeDir.open_under(outside, [root])
    os.symlink(outside, root / "escape")
    with pytest.raises(PathError, match="outside the allowed folders"):
        SafeDir.open_under(root / "escape", [root])
