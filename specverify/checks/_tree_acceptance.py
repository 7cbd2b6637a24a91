"""``trees.acceptance[kind]``: accepted candidates per call against the declared algorithm's exact
expectation on the same candidates (:mod:`specverify.checks._trees` holds the family's other checks).

Fewer than the algorithm is ``suboptimal``; more is information, said in the message and
``evidence["accepts_more"]``, never a failure: a lossless verifier can beat a tree algorithm (one
trying a duplicate sibling's subtree too), and the law checks judge its law.  A sampler declaring
no algorithm is held to the best listed algorithm lossless for those candidates.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .._evidence import Evidence
from .._models import ChainModel
from .._result import CheckResult
from .._trees.exact import accepted_law, tree_law
from ..errors import SamplerFault
from ..stats import mean_test
from ._base import Context, fault_result
from ._fixtures import random_laws
from ._tree_cases import BLOCK as _BLOCK
from ._tree_cases import TREE_SHAPES
from ._tree_posing import Posed, drawn_posed, model_drafts
from ._trees import TreeCheck, _ceiling, _draw, _rows, _run_rows, _sut

__all__ = ["TreeAcceptanceCheck"]


def _lossless_for(algorithm: str | None) -> tuple[str, ...]:
    """The algorithms an acceptance is held to: the declared one, or every listed algorithm that is
    lossless for candidates drawn as this family draws them for an undeclared sampler (i.i.d.)."""
    return (algorithm,) if algorithm is not None else ("specinfer", "target-only")


@dataclasses.dataclass
class TreeAcceptanceCheck(TreeCheck):
    """Accepted candidates per call against the algorithm's exact expectation on the same candidates."""

    name: str = "acceptance"
    proves: str | None = "suboptimal"

    def shape_name(self) -> str | None:
        return self.case

    def posed(self, algorithm: str | None) -> list[Posed]:
        return drawn_posed(self.case or "", algorithm)

    def run(self, ctx: Context) -> CheckResult:
        sut = _sut(ctx)
        algorithm = sut.algorithm
        shape = TREE_SHAPES[self.case or ""]
        parents = shape.parents if algorithm != _BLOCK else tuple(range(-1, shape.nodes - 1))
        shape = dataclasses.replace(shape, parents=parents)
        g = torch.Generator().manual_seed(ctx.seed_for(self.id, "model"))
        target = random_laws(g, (shape.vocab, shape.vocab))
        model = ChainModel(target, model_drafts(sut, random_laws(g, (shape.vocab, shape.vocab))), (0,))
        alpha = ctx.alpha / 2
        rows = _rows(ctx, shape.depth, alpha, large=shape.large, row_elements=2 * shape.nodes * shape.vocab)
        references = _lossless_for(algorithm)
        values: list[np.ndarray] = []
        laws: dict[str, list[np.ndarray]] = {name: [] for name in references}
        try:
            for tree, path, _ in _run_rows(ctx, _draw(shape, model, algorithm), rows, ctx.seed_for(self.id, "draw"), shape.nodes * shape.vocab):
                values.append(((path >= 0).sum(dim=1) - 1).numpy())
                for name in references:
                    laws[name].append(accepted_law(tree, tree_law(tree, name)).numpy())
        except SamplerFault as fault:
            return fault_result(self, fault)
        observed = np.concatenate(values)
        # One law for every row, the average of the rows' exact laws: its moment generating function
        # bounds the product of the rows' (AM-GM), so the Chernoff p-values stay valid, if conservative.
        tests = {name: mean_test(observed, np.concatenate(laws[name]).mean(axis=0), alpha=alpha, power=ctx.budget.power) for name in references}
        best = max(references, key=lambda name: tests[name].expected_mean)
        test = tests[best]
        detectable = test.min_detectable_drop or float("inf")
        evidence: Evidence = {
            "algorithm": algorithm, "held_to": best, "observed_accepted": test.observed_mean, "expected_accepted": test.expected_mean,
            "expected_by_algorithm": {name: t.expected_mean for name, t in tests.items()}, "ratio": test.observed_mean / max(test.expected_mean, 1e-12),
            "min_detectable_drop": detectable, "power": ctx.budget.power, "pvalue_low": test.pvalue_low, "pvalue_high": test.pvalue_high,
        }
        common = dict(alpha=alpha, samples=rows, evidence=evidence)
        summary = (
            f"{test.observed_mean:.4f} accepted candidates per call, {best!r} expects {test.expected_mean:.4f} on the same candidates "
            f"({rows} calls, trees of {shape.nodes - 1} candidates, V={shape.vocab}); a drop of {detectable:.3g} is detected with probability >= {ctx.budget.power}"
        )
        if test.pvalue_low <= alpha:
            return self.result("fail", f"accepts fewer candidates than {best!r}: {summary}", finding="suboptimal", p_value=test.pvalue_low, **common)
        # more than the algorithm: information, not a failure (a lossless verifier can beat a tree
        # algorithm, e.g. one trying a duplicate sibling's subtree too); the law checks judge its law
        evidence["accepts_more"] = bool(test.pvalue_high <= alpha)
        more = f"; it accepts more than {best!r} (p = {test.pvalue_high:.3g}): information, not a failure" if evidence["accepts_more"] else ""
        ceiling = shape.depth * _ceiling(ctx, shape.large)
        status = "pass" if detectable <= ceiling else "inconclusive"
        return self.result(status, summary + ("" if status == "pass" else f", above the ceiling {ceiling:.3g}") + more, p_value=test.pvalue_low, **common)
