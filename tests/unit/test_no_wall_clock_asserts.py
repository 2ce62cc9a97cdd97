"""Tests never assert wall-clock time (docs/DEVELOPING.md): a shared, busy machine makes any
duration a flake, and speed is what bench/ measures. This parses every test file and fails
on an `assert` that compares a difference of clock readings (`time.time()`,
`time.monotonic()`, `time.perf_counter()` and their `_ns` forms), directly or through a
variable assigned from one. A wait with a deadline (`while time.monotonic() < deadline`)
is not an assert and is what tests do instead. Pure: no services."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
CLOCKS = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns"}


def _is_clock_call(node: ast.AST) -> bool:
    """time.time(), time.monotonic(), ... or monotonic() / perf_counter() imported bare."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in CLOCKS and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in CLOCKS - {"time"}


def _mentions(node: ast.AST, names: set[str]) -> bool:
    """A clock call, or a name holding a clock reading, anywhere in `node`."""
    return any(
        _is_clock_call(n) or (isinstance(n, ast.Name) and n.id in names) for n in ast.walk(node)
    )


def _is_duration(node: ast.AST, readings: set[str], durations: set[str]) -> bool:
    """A difference of two clock readings in `node`, or a name assigned from one (a reading
    minus a constant or a stored timestamp is a point in time that test data is built
    around, not a measured duration)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in durations:
            return True
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
            if _mentions(n.left, readings) and _mentions(n.right, readings):
                return True
    return False


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
        targets = [node.target]
    else:
        return []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _value(node: ast.AST):
    return getattr(node, "value", None)


def wall_clock_asserts(source: str, filename: str = "<test>") -> list[tuple[int, str]]:
    """(line, source text) of each assert comparing a clock difference, per function."""
    tree = ast.parse(source, filename)
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found = {}
    for scope in [tree, *scopes]:
        readings: set[str] = set()
        durations: set[str] = set()
        assigns = [n for n in ast.walk(scope) if _targets(n) and _value(n) is not None]
        for _ in range(3):  # names assigned from names assigned from a clock, and so on
            for node in assigns:
                value = _value(node)
                if _is_duration(value, readings, durations):
                    durations.update(_targets(node))
                elif _mentions(value, readings):
                    readings.update(_targets(node))
        for node in ast.walk(scope):
            if not isinstance(node, ast.Assert):
                continue
            for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                operands = [compare.left, *compare.comparators]
                if any(_is_duration(o, readings, durations) for o in operands):
                    found[node.lineno] = ast.get_source_segment(source, node) or ""
    return sorted(found.items())


def test_no_test_asserts_a_wall_clock_duration():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for line, text in wall_clock_asserts(path.read_text(), str(path)):
            offenders.append(f"{path.relative_to(TESTS.parent)}:{line}: {text.splitlines()[0]}")
    assert not offenders, (
        "tests assert wall-clock time (wait on a condition instead; bench/ measures speed):\n"
        + "\n".join(offenders)
    )


def test_the_lint_sees_a_duration_asserted_directly_or_through_names():
    caught = """
import time
from time import perf_counter

def test_direct():
    started = time.monotonic()
    assert time.monotonic() - started < 30

def test_through_a_name():
    t0 = perf_counter()
    elapsed = perf_counter() - t0
    took_ms = elapsed * 1000
    assert took_ms <= 5, took_ms

def test_walrus():
    began = time.time()
    assert (spent := time.time() - began) < 2
"""
    assert [line for line, _ in wall_clock_asserts(caught)] == [7, 13, 17]


def test_the_lint_lets_deadlines_and_other_comparisons_pass():
    allowed = """
import time

def wait(predicate):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    assert False, "not in 20 s"

def test_counts():
    before, after = 3, 5
    assert after - before == 2
    at = time.time()
    assert isinstance(at, float)
"""
    assert wall_clock_asserts(allowed) == []
