"""``trees.acceptance[kind]``: accepted candidates per call against the declared algorithm's exact
expectation on the same candidates, tallied on the rows ``trees.target-law[kind]`` draws
(:mod:`specverify.checks._tree_target`): one draw of trees, two tests, each at its own share of the
run's level (Bonferroni holds whatever the dependence between them).

Fewer than the algorithm is ``suboptimal``; more is information, said in the message and
``evidence["accepts_more"]``, never a failure: a lossless verifier can beat a tree algorithm (one
trying a duplicate sibling's subtree too), and the law checks judge its law.  A sampler declaring
no algorithm is held to the best listed algorithm lossless for those candidates.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from .._record.evidence import Evidence
from .._record.result import CheckResult
from .._trees.contract import TreeBatch
from .._trees.exact import accepted_law, tree_law
from ..stats import mean_test
from ._base import Context
from ._tree_cases import TreeShape
from ._tree_tally import ceiling, planned_rows

__all__ = ["AcceptanceTally"]


def _lossless_for(algorithm: str | None) -> tuple[str, ...]:
    """The algorithms an acceptance is held to: the declared one, or every listed algorithm that is
    lossless for candidates drawn as this family draws them for an undeclared sampler (i.i.d.)."""
    return (algorithm,) if algorithm is not None else ("specinfer", "target-only")


@dataclasses.dataclass
class AcceptanceTally:
    """Accepted candidates per row and each reference algorithm's exact law of them, chunk by chunk."""

    id: str
    case: str
    algorithm: str | None
    shape: TreeShape
    values: list[np.ndarray] = dataclasses.field(default_factory=list)
    laws: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=dict)

    @property
    def references(self) -> tuple[str, ...]:
        return _lossless_for(self.algorithm)

    def rows(self, ctx: Context) -> int:
        """Rows the mean test needs at its level (half the decision's: the low side decides)."""
        return planned_rows(
            ctx,
            self.shape.depth,
            ctx.alpha / 2,
            large=self.shape.large,
            row_elements=2 * self.shape.nodes * self.shape.vocab,
        )

    def add(self, tree: TreeBatch, path: torch.Tensor, token: torch.Tensor) -> None:
        self.values.append(((path >= 0).sum(dim=1) - 1).numpy())
        for name in self.references:
            self.laws.setdefault(name, []).append(accepted_law(tree, tree_law(tree, name)).numpy())

    def result(self, ctx: Context, *, tallied_with: str, planned: int) -> CheckResult:
        """The decision: ``fail`` (``suboptimal``) where fewer are accepted than the best reference
        expects at ``alpha / 2``; more is information; ``inconclusive`` past the ceiling."""
        alpha, shape = ctx.alpha / 2, self.shape
        observed = np.concatenate(self.values)
        rows = observed.size
        # One law for every row, the average of the rows' exact laws: its moment generating function
        # bounds the product of the rows' (AM-GM), so the Chernoff p-values stay valid, if conservative.
        tests = {
            name: mean_test(observed, np.concatenate(self.laws[name]).mean(axis=0), alpha=alpha, power=ctx.budget.power)
            for name in self.references
        }
        best = max(self.references, key=lambda name: tests[name].expected_mean)
        test = tests[best]
        detectable = test.min_detectable_drop or float("inf")
        evidence: Evidence = {
            "algorithm": self.algorithm,
            "held_to": best,
            "observed_accepted": test.observed_mean,
            "expected_accepted": test.expected_mean,
            "expected_by_algorithm": {name: t.expected_mean for name, t in tests.items()},
            "ratio": test.observed_mean / max(test.expected_mean, 1e-12),
            "min_detectable_drop": detectable,
            "power": ctx.budget.power,
            "pvalue_low": test.pvalue_low,
            "pvalue_high": test.pvalue_high,
            "tallied_with": tallied_with,
            "planned_rows": planned,
            "stopped_early": rows < planned,
        }
        common: dict[str, Any] = dict(alpha=alpha, samples=rows, evidence=evidence)
        stopped = (
            f" (the draw stopped after {rows} of {planned} rows: {tallied_with} rejected)" if rows < planned else ""
        )
        summary = (
            f"{test.observed_mean:.4f} accepted candidates per call, {best!r} expects {test.expected_mean:.4f} on the "
            f"same candidates ({rows} calls, trees of {shape.nodes - 1} candidates, V={shape.vocab}, the rows of "
            f"{tallied_with}){stopped}; a drop of {detectable:.3g} is detected with probability >= {ctx.budget.power}"
        )
        if test.pvalue_low <= alpha:
            return self._result(
                "fail",
                f"accepts fewer candidates than {best!r}: {summary}",
                finding="suboptimal",
                p_value=test.pvalue_low,
                **common,
            )
        # more than the algorithm: information, not a failure (a lossless verifier can beat a tree
        # algorithm, e.g. one trying a duplicate sibling's subtree too); the law checks judge its law
        evidence["accepts_more"] = bool(test.pvalue_high <= alpha)
        more = (
            f"; it accepts more than {best!r} (p = {test.pvalue_high:.3g}): information, not a failure"
            if evidence["accepts_more"]
            else ""
        )
        top = shape.depth * ceiling(ctx, shape.large)
        status = "pass" if detectable <= top else "inconclusive"
        return self._result(
            status,
            summary + ("" if status == "pass" else f", above the ceiling {top:.3g}") + more,
            p_value=test.pvalue_low,
            **common,
        )

    def _result(self, status: str, message: str, **fields: Any) -> CheckResult:
        return CheckResult(
            id=self.id, family="trees", case=self.case, status=status, message=message, proves="suboptimal", **fields
        )
