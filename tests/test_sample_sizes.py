"""One rule for sample sizes: every statistical decision is sized by :func:`specverify._budgets.sample_size`.

The rule is the only caller of :func:`specverify.stats.samples_needed` outside the statistics
library (whose own designs, the two-stage plan and the futility plan, size themselves), so a check
cannot give a decision its own size or cap, and the plan, which rehearses the checks' own code,
counts what the rule gives.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import specverify
from specverify._budgets import BUDGETS, SampleSize, budget_for_tv, sample_size
from specverify.stats import samples_needed

PACKAGE = pathlib.Path(specverify.__file__).parent
#: Where ``samples_needed`` may be called: the rule, and the statistics library's own designs.
ALLOWED = {
    ("_budgets.py", "sample_size"),
    ("stats/_alpha.py", "plan_two_stage"),
    ("stats/_futility.py", "final_samples"),
}


class _Calls(ast.NodeVisitor):
    """The innermost function around each call of ``name`` (by name or as an attribute)."""

    def __init__(self, name: str) -> None:
        self.name, self.stack, self.found = name, ["<module>"], set()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if called == self.name:
            self.found.add(self.stack[-1])
        self.generic_visit(node)


def callers(name: str, root: pathlib.Path = PACKAGE) -> set[tuple[str, str]]:
    """``(module path, enclosing function)`` of every call of ``name`` under ``root``."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        calls = _Calls(name)
        calls.visit(ast.parse(path.read_text(), filename=str(path)))
        found |= {(path.relative_to(root).as_posix(), function) for function in calls.found}
    return found


def test_samples_needed_is_called_from_the_rule_alone():
    assert callers("samples_needed") == ALLOWED


def test_the_caller_scan_sees_a_planted_call(tmp_path):
    planted = tmp_path
    (planted / "a.py").write_text("from x import samples_needed\n\ndef f():\n    return samples_needed(0.1, 1, 0.1)\n")
    (planted / "b.py").write_text("import x\n\ndef g():\n    def h():\n        return x.samples_needed(0.1, 1, 0.1)\n")
    (planted / "c.py").write_text("samples_needed = None\n")  # a name, not a call
    assert callers("samples_needed", planted) == {("a.py", "f"), ("b.py", "h")}


def test_the_rule_is_the_power_analysis_under_its_cap_and_over_its_floor():
    needed = samples_needed(0.05, 7, 1e-3, 0.99)
    assert sample_size(0.05, 7, 1e-3, 0.99, cap=10**9) == SampleSize(needed, needed)
    assert sample_size(0.05, 7, 1e-3, 0.99, cap=needed // 2) == SampleSize(needed, needed // 2)
    assert sample_size(0.05, 7, 1e-3, 0.99, cap=needed // 2).capped
    assert sample_size(0.05, 7, 1e-3, 0.99, cap=10, floor=64) == SampleSize(needed, 64)
    assert sample_size(0.05, 7, 1e-3, 0.99, cap=10**9, factor=2) == SampleSize(2 * needed, 2 * needed)
    # no degrees of freedom (one cell) is sized as one: the test is still run, and a one-cell law needs as many
    assert sample_size(0.05, 0, 1e-3, 0.99, cap=10**9) == sample_size(0.05, 1, 1e-3, 0.99, cap=10**9)


def test_a_smaller_tv_a_smaller_alpha_or_a_higher_power_needs_more():
    base = sample_size(0.05, 3, 1e-3, 0.9, cap=10**12).needed
    assert sample_size(0.01, 3, 1e-3, 0.9, cap=10**12).needed == pytest.approx(25 * base, rel=1e-3)
    assert sample_size(0.05, 3, 1e-5, 0.9, cap=10**12).needed > base
    assert sample_size(0.05, 3, 1e-3, 0.99, cap=10**12).needed > base


def test_a_preset_shares_one_cap_among_a_checks_decisions_and_a_tv_budget_caps_each():
    quick = BUDGETS["quick"]
    assert quick.sample_size(3, 1e-3, tv=1e-3, decisions=4).samples == quick.max_samples // 4
    tv_budget = budget_for_tv(0.001)
    assert tv_budget.sample_size(3, 1e-3, tv=1e-4, decisions=4).samples == tv_budget.max_samples
    assert tv_budget.sample_size(3, 1e-3, tv=0.5, decisions=4).samples == samples_needed(0.5, 3, 1e-3, 0.99)


def test_the_budget_method_fills_in_the_budgets_tv_power_and_cap():
    standard = BUDGETS["standard"]
    size = standard.sample_size(5, 1e-4)
    assert size == sample_size(standard.tv, 5, 1e-4, standard.power, standard.decision_cap())
    assert standard.sample_size(5, 1e-4, power=standard.stage_power).needed > size.needed  # sqrt(0.99) > 0.99
    assert standard.sample_size(5, 1e-4, cap=100, floor=10).samples == 100


def test_a_shapes_volume_affords_its_rows_and_never_fewer_than_the_fewest():
    quick = BUDGETS["quick"]
    assert quick.volume_cap(1) == quick.shape_volume
    assert quick.volume_cap(quick.shape_volume) == quick.shape_min_rows
