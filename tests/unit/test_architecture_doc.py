"""docs/ARCHITECTURE.md and the settings tables say what the code does.

The release state diagram is drawn from `TRANSITIONS`, the beat schedule table from
`CELERY_BEAT_SCHEDULE`, the files and functions the doc names exist, and every environment
variable the product code reads (the settings' `env.<cast>("NAME")`, any `os.environ` /
`os.getenv` with a literal name) has a row in docs/operations.md's settings tables.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

from django.conf import settings

from releases.state_machine import TERMINAL, TRANSITIONS, Phase

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
SETTINGS_FILES = [
    ROOT / "controlplane" / "env.py",
    *(ROOT / "controlplane" / "settings").glob("*.py"),
]
SETTINGS_DOCS = [ROOT / "docs" / "operations.md"]
# The operating system's own variables, passed on to child processes, are not settings.
OS_VARIABLES = {"LD_LIBRARY_PATH", "XDG_CONFIG_HOME"}


def product_files() -> list[Path]:
    """Every module of the product: the top-level packages but tests, and manage.py."""
    packages = [p.parent for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests"]
    files = [f for package in packages for f in package.rglob("*.py")]
    return [ROOT / "manage.py", *(f for f in files if "migrations" not in f.parts)]


def _section(heading: str) -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/ARCHITECTURE.md has no '## {heading}' section"
    return match.group(1)


def drawn_transitions(section: str) -> set[tuple[str, str]]:
    block = re.search(r"```mermaid\n(stateDiagram-v2\n.*?)```", section, re.S)
    assert block, "no stateDiagram-v2 block"
    edges = re.findall(r"^\s*(\[\*\]|\w+) --> (\[\*\]|\w+)\s*(?::.*)?$", block.group(1), re.M)
    return set(edges)


def table_transitions() -> set[tuple[str, str]]:
    edges = {(a.value, b.value) for a, targets in TRANSITIONS.items() for b in targets}
    return edges | {("[*]", Phase.PENDING.value)} | {(p.value, "[*]") for p in TERMINAL}


def test_the_state_diagram_draws_exactly_the_transition_table():
    drawn = drawn_transitions(_section("The release state machine"))
    expected = table_transitions()
    missing = "\n".join(f"  {a} --> {b}" for a, b in sorted(expected - drawn))
    assert not missing, f"transitions of releases/state_machine.py not drawn:\n{missing}"
    assert not drawn - expected, f"drawn but not in the table: {sorted(drawn - expected)}"


def test_the_diagram_check_catches_a_missing_transition():
    section = _section("The release state machine").replace("  DRAINING --> SUCCEEDED\n", "")
    assert ("DRAINING", "SUCCEEDED") in table_transitions() - drawn_transitions(section)


def test_the_beat_table_lists_every_entry_with_its_task_and_cadence():
    section = _section("Beat schedule")
    rows = {
        entry: (task, float(seconds))
        for entry, task, seconds in re.findall(
            r"^\| `([\w-]+)` \| `([\w.]+)` \| ([\d.]+) s", section, re.M
        )
    }
    schedule = {
        entry: (spec["task"], float(spec["schedule"]))
        for entry, spec in settings.CELERY_BEAT_SCHEDULE.items()
    }
    assert rows == schedule


def _base_name(node: ast.AST) -> str:
    """`X` of `X`, `X[...]` and `X.attr`."""
    if isinstance(node, ast.Subscript | ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def beat_schedule_writes(paths: list[Path]) -> list[str]:
    """`file:line` of every statement that assigns, extends or updates CELERY_BEAT_SCHEDULE."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                targets = [node.func.value]  # CELERY_BEAT_SCHEDULE.update(...)
            else:
                continue
            if any(_base_name(t) == "CELERY_BEAT_SCHEDULE" for t in targets):
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                found.append(f"{where}:{node.lineno}")
    return found


def test_the_beat_schedule_is_declared_once_in_one_place():
    writes = beat_schedule_writes(product_files())
    assert len(writes) == 1 and writes[0].startswith("controlplane/settings/base.py:"), (
        f"declare every entry in the one CELERY_BEAT_SCHEDULE literal: {writes}"
    )


def test_the_beat_check_catches_an_entry_added_elsewhere(tmp_path):
    module = tmp_path / "late.py"
    module.write_text('CELERY_BEAT_SCHEDULE["x"] = {}\nCELERY_BEAT_SCHEDULE.update(y={})\n')
    assert beat_schedule_writes([module]) == ["late.py:1", "late.py:2"]


def env_names_read(paths: list[Path]) -> set[str]:
    """Every NAME in `env("NAME"...)` or `env.<cast>("NAME"...)` of these modules."""
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            is_env = (isinstance(func, ast.Name) and func.id == "env") or (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "env"
            )
            first = node.args[0]
            if is_env and isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
    return names


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def os_environ_names_read(paths: list[Path]) -> set[str]:
    """Every literal NAME in `os.environ[NAME]`, `os.environ.get(NAME)` (and `.setdefault`,
    `.pop`), `os.getenv(NAME)` and `NAME in os.environ` of these modules."""
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Subscript) and _is_os_environ(node.value):
                name = _literal(node.slice)
            elif isinstance(node, ast.Call) and node.args:
                func = node.func
                if isinstance(func, ast.Attribute) and (
                    (_is_os_environ(func.value) and func.attr in {"get", "setdefault", "pop"})
                    or (
                        func.attr == "getenv"
                        and isinstance(func.value, ast.Name)
                        and func.value.id == "os"
                    )
                ):
                    name = _literal(node.args[0])
            elif isinstance(node, ast.Compare) and any(_is_os_environ(c) for c in node.comparators):
                name = _literal(node.left)
            if name:
                names.add(name)
    return names


def documented_names(text: str) -> tuple[set[str], list[str]]:
    """Names in backticks on table rows, with `FIRST_NAME` / `..._SUFFIX` shorthands expanded
    against the row's first full name; names with `*` come back as patterns."""
    names, patterns = set(), []
    for row in re.findall(r"^\|(.*)\|$", text, re.M):
        tokens = re.findall(r"`([A-Z][A-Z0-9_]*\*?|\.\.\._[A-Z0-9_]+)`", row)
        full = [t for t in tokens if not t.startswith("...")]
        for token in tokens:
            if token.endswith("*"):
                patterns.append(token)
            elif token.startswith("...") and full:
                suffix, parts = token[3:], full[0].split("_")
                names.update("_".join(parts[:i]) + suffix for i in range(1, len(parts)))
            else:
                names.add(token)
    return names, patterns


def undocumented(read: set[str], docs: list[str]) -> list[str]:
    names, patterns = set(), []
    for text in docs:
        found, globs = documented_names(text)
        names |= found
        patterns += globs
    return sorted(
        n for n in read if n not in names and not any(fnmatch.fnmatch(n, p) for p in patterns)
    )


def test_every_environment_variable_the_settings_read_is_documented():
    read = env_names_read(SETTINGS_FILES)
    assert {"DATABASE_URL", "SWITCHYARD_VAR_DIR", "SWITCHYARD_METRICS_QUEUES"} <= read
    docs = [path.read_text(encoding="utf-8") for path in SETTINGS_DOCS]
    assert undocumented(read, docs) == [], "add a row to docs/operations.md's settings tables"


def test_every_environment_variable_the_product_reads_directly_is_documented():
    files = product_files()
    assert ROOT / "controlplane" / "settings" / "test.py" in files
    read = (os_environ_names_read(files) | env_names_read(files)) - OS_VARIABLES
    assert {"SWITCHYARD_URL", "SWITCHYARD_TEST_CACHE_PREFIX", "DJANGO_SETTINGS_MODULE"} <= read
    docs = [path.read_text(encoding="utf-8") for path in SETTINGS_DOCS]
    assert undocumented(read, docs) == [], "add a row to docs/operations.md's settings tables"


def test_the_os_environ_scan_finds_every_form(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n"
        "a = os.environ['A_1']\n"
        "b = os.environ.get('B_1', '')\n"
        "os.environ.setdefault('C_1', 'x')\n"
        "d = os.getenv('D_1')\n"
        "e = 'E_1' in os.environ\n"
        "f = {n: os.environ[n] for n in ('NOT_LITERAL',)}\n"
    )
    assert os_environ_names_read([module]) == {"A_1", "B_1", "C_1", "D_1", "E_1"}


def test_the_settings_check_expands_shorthands_and_catches_a_missing_row():
    table = (
        "| `SWITCHYARD_TRITON_TIMEOUT_S` / `..._LOAD_TIMEOUT_S` | 5 / 120 | |\n"
        "| `DJANGO_SECURE_*` | | |\n"
    )
    read = {
        "SWITCHYARD_TRITON_LOAD_TIMEOUT_S",
        "DJANGO_SECURE_HSTS_PRELOAD",
        "SWITCHYARD_NEW_KNOB",
    }
    assert undocumented(read, [table]) == ["SWITCHYARD_NEW_KNOB"]


def named_paths(text: str) -> set[str]:
    """Repository paths the doc names in backticks (`releases/services.py`, `accounts/`)."""
    return set(re.findall(r"`((?:[\w.-]+/)+[\w.-]*)`", text))


def named_functions(text: str) -> set[tuple[str, str]]:
    """(file, name) where the doc writes "`path.py` `name`": a function or class of that file."""
    return set(re.findall(r"`([\w/]+\.py)` `(\w+)`", text))


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in ast.walk(tree) if isinstance(node, kinds)}


def test_every_file_and_function_the_doc_names_exists():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    paths = named_paths(text)
    assert "releases/tick.py" in paths
    assert [p for p in sorted(paths) if not (ROOT / p).exists()] == []
    functions = named_functions(text)
    assert ("releases/tick.py", "release_tick") in functions
    gone = [(f, name) for f, name in sorted(functions) if name not in _defined(ROOT / f)]
    assert gone == [], f"docs/ARCHITECTURE.md names functions that are not there: {gone}"


def test_the_name_check_catches_a_renamed_function():
    named = named_functions("`releases/services.py` `release_tick_renamed` then")
    assert named == {("releases/services.py", "release_tick_renamed")}
    assert "release_tick_renamed" not in _defined(ROOT / "releases/services.py")
