"""The repository documents itself: no tracked file points at documents outside it (issue #16).

A clone holds only what git tracks, so a reference to a folder beside the checkout or to notes kept
beside the repository (by their file names) leads a reader nowhere. The facts they held are
restated in docs/ (ARCHITECTURE.md, DEVELOPING.md, TRITON.md, API.md).
"""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Design notes that lived outside the repository. docs/API.md and docs/TRITON.md are the
# repository's own, so those two names are allowed.
OUTSIDE = re.compile(r"\.\./shared|\b(?:STACK_NOTES|DESIGN|STYLE|UI)\.md\b")


def _tracked_files():
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        path = ROOT / name.decode()
        if path.is_file() and not path.is_symlink():
            yield path


def _references(path):
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return
    for number, line in enumerate(text.splitlines(), 1):
        if OUTSIDE.search(line):
            yield f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}"


def test_the_pattern_catches_outside_references():
    assert OUTSIDE.search("see " + "../" + "shared/API.md")
    assert OUTSIDE.search("(" + "STACK_NOTES" + ".md)")
    assert not OUTSIDE.search("docs/API.md and docs/TRITON.md, docs/ARCHITECTURE.md")


def test_no_tracked_file_points_outside_the_repository():
    found = [hit for path in _tracked_files() for hit in _references(path)]
    assert not found, "references to documents outside the repository:\n" + "\n".join(found)
