"""The import order docs/ARCHITECTURE.md draws is the one the code follows.

The order and its exceptions live only in docs/ARCHITECTURE.md (the `layers` Mermaid block
and the exceptions table under "Import order"); this test parses them, reads every product
module's imports with `ast` (module level and inside functions) and fails on any import that
goes against the order. No Django needed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
# Top-level packages that are not product code.
NOT_PRODUCT = frozenset({"tests"})
# The composition root: settings, URLs, ASGI and Celery wiring. It is outside the chain: only
# the modules the exceptions table names may import apps, and apps import it only where named.
ROOT_PACKAGE = "controlplane"


@dataclass(frozen=True)
class Layers:
    order: tuple[str, ...]  # highest first: a package may import only packages after it
    exceptions: frozenset[tuple[str, str]]  # (module path, imported package), each explained


@dataclass(frozen=True)
class Edge:
    path: str  # repository-relative module path, e.g. "console/health.py"
    line: int
    source: str  # the package the module belongs to
    target: str  # the product package it imports


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/ARCHITECTURE.md has no '## {heading}' section"
    return match.group(1)


def parse_layers(text: str) -> Layers:
    """The order from the `flowchart` chain of the "Import order" section, and the exceptions
    from its table rows `| \\`module.py\\` | \\`package\\` | reason |` (a reason is required)."""
    section = _section(text, "Import order")
    block = re.search(r"```mermaid\n(.*?)```", section, re.S)
    assert block, "the Import order section has no mermaid block"
    order: list[str] = []
    for line in block.group(1).splitlines():
        if "-->" not in line:
            continue
        for name in (part.strip() for part in line.split("-->")):
            if name not in order:
                order.append(name)
    exceptions = set()
    for row in re.finditer(r"^\| `([\w/.]+\.py)` \| `(\w+)[\w.]*` \| (.*?) \|$", section, re.M):
        assert row.group(3).strip(), f"exception {row.group(1)} -> {row.group(2)} gives no reason"
        exceptions.add((row.group(1), row.group(2)))
    return Layers(tuple(order), frozenset(exceptions))


def product_packages(root: Path) -> list[str]:
    return sorted(
        p.parent.name for p in root.glob("*/__init__.py") if p.parent.name not in NOT_PRODUCT
    )


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def import_edges(root: Path, packages: list[str]) -> list[Edge]:
    """Every import from one product package into another, with where it is."""
    edges = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                for name in _imported(node):
                    target = name.split(".")[0]
                    if target in packages and target != package:
                        rel = path.relative_to(root).as_posix()
                        edges.append(Edge(rel, node.lineno, package, target))
    return edges


def violations(edges: list[Edge], layers: Layers) -> list[str]:
    """Imports against the order, as readable lines; exceptions the table names are allowed."""
    rank = {name: i for i, name in enumerate(layers.order)}
    bad = []
    for edge in edges:
        if (edge.path, edge.target) in layers.exceptions:
            continue
        if ROOT_PACKAGE in (edge.source, edge.target):
            allowed = False  # the root imports apps (and is imported) only where the table says
        else:
            allowed = rank[edge.source] < rank[edge.target]
        if not allowed:
            bad.append(f"{edge.path}:{edge.line}: {edge.source} imports {edge.target}")
    return bad


def _layers() -> Layers:
    return parse_layers(ARCHITECTURE.read_text(encoding="utf-8"))


def standalone_packages(text: str) -> set[str]:
    """The packages the "Stand-alone packages:" line of the Import order section names."""
    line = re.search(r"^Stand-alone packages: (.*?)\.", _section(text, "Import order"), re.M)
    return set(re.findall(r"`(\w+)`", line.group(1))) if line else set()


def test_every_product_package_has_its_place_in_the_documented_order():
    layers = _layers()
    placed = set(layers.order) | {ROOT_PACKAGE} | standalone_packages(ARCHITECTURE.read_text())
    missing = [p for p in product_packages(ROOT) if p not in placed]
    assert not missing, f"add {missing} to the Import order of docs/ARCHITECTURE.md"
    gone = [p for p in layers.order if not (ROOT / p / "__init__.py").exists()]
    assert not gone, f"docs/ARCHITECTURE.md orders packages that do not exist: {gone}"


def test_no_import_goes_against_the_documented_order():
    edges = import_edges(ROOT, product_packages(ROOT))
    assert edges, "no imports found: the parser is broken"
    bad = violations(edges, _layers())
    assert not bad, "imports against docs/ARCHITECTURE.md's order:\n" + "\n".join(bad)


def test_every_documented_exception_is_still_needed():
    layers = _layers()
    used = {(e.path, e.target) for e in import_edges(ROOT, product_packages(ROOT))}
    stale = sorted(layers.exceptions - used)
    assert not stale, f"exceptions no import needs any more (remove them from the doc): {stale}"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return tmp_path


DOC = """# Architecture
## Import order
```mermaid
flowchart TD
  high --> low
  low --> base
```
| module | imports | why |
|---|---|---|
| `controlplane/urls.py` | `high` | the root mounts the app's URLs |
## Next
"""


def test_a_back_edge_is_reported_with_its_place(tmp_path):
    root = _tree(
        tmp_path,
        {
            "high/__init__.py": "",
            "high/views.py": "from low.services import go\nimport base.models\n",
            "low/__init__.py": "",
            "low/services.py": "def go():\n    from high.views import x  # lazy, still an edge\n",
            "base/__init__.py": "",
            "controlplane/__init__.py": "",
            "controlplane/urls.py": "import high.views\n",
            "controlplane/settings.py": "from low import services\n",
        },
    )
    layers = parse_layers(DOC)
    assert layers.order == ("high", "low", "base")
    edges = import_edges(root, product_packages(root))
    assert violations(edges, layers) == [
        "controlplane/settings.py:1: controlplane imports low",
        "low/services.py:2: low imports high",
    ]


def test_an_exception_without_a_reason_is_refused():
    doc = DOC.replace("the root mounts the app's URLs", " ")
    try:
        parse_layers(doc)
    except AssertionError as exc:
        assert "gives no reason" in str(exc)
    else:
        raise AssertionError("an unexplained exception was accepted")


def test_stand_alone_packages_import_no_other_package_of_the_project():
    alone = standalone_packages(ARCHITECTURE.read_text())
    assert alone, "docs/ARCHITECTURE.md names no stand-alone package"
    edges = import_edges(ROOT, product_packages(ROOT))
    bad = [f"{e.path}:{e.line} imports {e.target}" for e in edges if e.source in alone]
    assert not bad, bad
