"""No function or method in product code is longer than 60 lines (issue #16).

Walks every product package with `ast` (tests/, bench/, examples/ and migrations aside) and
names each function over the limit, so a long one is shortened rather than grown.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 60
NOT_PRODUCT = {"tests", "bench", "examples", "node_modules", "migrations"}


def _product_files():
    for package in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").is_file()):
        if package.name in NOT_PRODUCT:
            continue
        for path in sorted(package.rglob("*.py")):
            if not NOT_PRODUCT.intersection(path.relative_to(ROOT).parts):
                yield path


def _long_functions(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > LIMIT:
                yield f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)"


def test_the_walk_sees_the_product_apps():
    names = {path.relative_to(ROOT).parts[0] for path in _product_files()}
    assert {"releases", "deployments", "console", "accounts", "telemetry"} <= names
    assert not names & NOT_PRODUCT


def test_no_product_function_is_longer_than_the_limit():
    too_long = [line for path in _product_files() for line in _long_functions(path)]
    assert not too_long, "functions over 60 lines:\n" + "\n".join(too_long)
