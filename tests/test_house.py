"""The house's limits: a module says one thing, a function does one thing.

No module of the package over 600 lines and no function over 80 (issue 27): past those sizes a
file holds several concepts and a function several steps, and both are read less than they are
changed.
"""

from __future__ import annotations

import ast
import pathlib

import specverify

PACKAGE = pathlib.Path(specverify.__file__).parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> list[pathlib.Path]:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50  # the walk found the package
    return modules


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_80_lines():
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_function_probe_measures_a_long_function():
    source = "def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES + 1)
    node = ast.parse(source).body[0]
    assert node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES  # type: ignore[attr-defined]
