"""The house's limits: a module says one thing, a function does one thing.

No module of the package over 600 lines and no function over 80 (issue 27): past those sizes a
file holds several concepts and a function several steps, and both are read less than they are
changed.  A function's length is the number of lines its statements begin on: the formatter
(``ruff format``) spreads one call over as many lines as its arguments need, and a step written on
six lines is still one step.
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
    long = {
        str(p.relative_to(PACKAGE)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def _statement_lines(function: ast.AST) -> int:
    """The lines a function's statements (its ``def`` included) begin on."""
    return len({node.lineno for node in ast.walk(function) if isinstance(node, ast.stmt)})


def test_no_function_is_over_80_lines():
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = _statement_lines(node)
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_function_probe_measures_a_long_function():
    source = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    assert _statement_lines(ast.parse(source).body[0]) > MAX_FUNCTION_LINES


def test_the_function_probe_counts_a_call_spread_over_lines_once():
    source = "def f():\n    g(\n        1,\n        2,\n    )\n    return 3\n"
    assert _statement_lines(ast.parse(source).body[0]) == 3
