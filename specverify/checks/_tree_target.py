"""``trees.target-law[kind]`` and, on the same rows, ``trees.acceptance[kind]``.

Candidates are drawn by the harness from a model as the algorithm assumes (i.i.d. from the draft;
without replacement for ``without-replacement``), the emitted tokens completed by the target to
``D + 1`` tokens and tested against the target's joint law (failure ``loss``).  At the family's
shapes the same rows are tallied a second way, accepted candidates per call against the declared
algorithm's exact expectation on the same candidates (:mod:`specverify.checks._tree_acceptance`,
failure ``suboptimal``): one draw of trees, two decisions, each at its own Bonferroni share (the
union bound needs no independence), the draw as long as the longer of the two needs.  The law
decision also watches an anytime-valid test (:mod:`specverify.checks._tree_tally`): a failing
sampler's draw stops when it rejects.  Kinds ``V=<n>`` test the law at production vocabularies on
a structured model (a few active tokens, the rest lumped into one tail cell per position).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .._laws.exact import target_law
from .._laws.models import ChainModel
from .._record.evidence import Evidence
from .._record.result import CheckResult
from .._trees.contract import TreeBatch
from .._trees.draw import completed_sequences, draw_tree, emitted_sequences
from ..errors import SamplerFault
from ._base import Context, Decision, check_id, fault_result
from ._fixtures import random_laws
from ._tree_acceptance import AcceptanceTally
from ._tree_cases import (
    BLOCK,
    PRODUCTION_PARENTS,
    TREE_SHAPES,
    WITHOUT_REPLACEMENT,
    TreeShape,
    case_json,
    lumped_model,
    rows_slice,
)
from ._tree_posing import Posed, drawn_posed, model_drafts
from ._tree_tally import TARGET_LAW, LawDecision, detects, law_result, planned_rows, sut_of, tally
from ._trees import TreeCheck

__all__ = ["TreeTargetLawCheck"]


def _draw(shape: TreeShape, model: Any, algorithm: str | None) -> Callable[[int, torch.Generator], TreeBatch]:
    replacement = algorithm != WITHOUT_REPLACEMENT
    return lambda count, g: draw_tree(model, shape.parents, count, g, replacement=replacement)


@dataclasses.dataclass
class TreeTargetLawCheck(TreeCheck):
    """Candidates drawn as the algorithm assumes; the completed emitted tokens against the target's
    law, and (at the family's shapes) the accepted candidates of the same rows."""

    name: str = "target-law"
    proves: str | None = "loss"

    @property
    def decisions(self) -> int:
        return len(self.decision_list())

    def decision_list(self) -> list[Decision]:
        own = [Decision(self.id, self.family, self.case, "loss")]
        if self.case in TREE_SHAPES:
            own.append(Decision(check_id(self.family, "acceptance", self.case), self.family, self.case, "suboptimal"))
        return own

    def shape_name(self) -> str | None:
        return self.case if self.case in TREE_SHAPES else None

    def posed(self, algorithm: str | None) -> list[Posed]:
        return drawn_posed(self.case or "", algorithm)

    def unfit(self, sut: Any) -> str | None:
        reason = super().unfit(sut)
        if reason or self.case in TREE_SHAPES:
            return reason
        if sut.algorithm == BLOCK:
            return "block verification is defined on chains only"
        return sut.unsupported(int((self.case or "V=0")[2:]))

    def _model(
        self, ctx: Context, algorithm: str | None
    ) -> tuple[TreeShape, Any, np.ndarray, Callable[[torch.Tensor], torch.Tensor]]:
        """The shape, the model candidates are drawn from, the target's law of the completed
        sequences' cells and the map of sequences to cells."""
        seed = ctx.seed_for(self.id, "model")
        if self.case in TREE_SHAPES:
            shape = TREE_SHAPES[self.case]
            shape = dataclasses.replace(
                shape, parents=shape.parents if algorithm != BLOCK else tuple(range(-1, shape.nodes - 1))
            )
            g = torch.Generator().manual_seed(seed)
            target = random_laws(g, (shape.vocab, shape.vocab), zeros=0.6 if shape.large else 0.0)
            model: Any = ChainModel(target, model_drafts(ctx.sut, random_laws(g, (shape.vocab, shape.vocab))), (0,))
            length, base = shape.depth + 1, shape.vocab
            law = target_law(model, length).numpy()
            classes: Callable[[torch.Tensor], torch.Tensor] = lambda seqs: seqs  # noqa: E731
        else:
            shape = TreeShape(PRODUCTION_PARENTS, int((self.case or "V=0")[2:]), large=True)
            model = lumped_model(shape.vocab, seed, ctx.sut.tree_limits)
            length, base = shape.depth + 1, model.actives.numel() + 1
            law = model.class_law(length)
            classes = model.classes
        powers = base ** torch.arange(length - 1, -1, -1)
        return shape, model, law, lambda seqs: (classes(seqs) * powers).sum(dim=1)

    def run(self, ctx: Context) -> CheckResult | list[CheckResult]:
        sut = sut_of(ctx)
        algorithm = sut.algorithm
        if self.case not in TREE_SHAPES and (vocab := int((self.case or "V=0")[2:])) > ctx.budget.shape_max_vocab:
            return self.result(
                "skip",
                f"V={vocab:,} is above the {ctx.budget.name} budget's shape_max_vocab={ctx.budget.shape_max_vocab:,}",
            )
        shape, model, law, cells = self._model(ctx, algorithm)
        length = shape.depth + 1
        decision = LawDecision(law, ctx.alpha, ctx.budget.shape_tv if shape.large else ctx.budget.tv)
        rows = planned_rows(
            ctx,
            int((law > 0).sum()) - 1,
            decision.fixed_alpha,
            large=shape.large,
            row_elements=2 * shape.nodes * shape.vocab,
        )
        acceptance = None
        if self.case in TREE_SHAPES:
            acceptance = AcceptanceTally(self.decision_list()[1].id, self.case, algorithm, shape)
            rows = max(rows, acceptance.rows(ctx))
        decision.planned = rows
        completion = torch.Generator().manual_seed(ctx.seed_for(self.id, "complete"))
        try:
            counts, last_tree = tally(
                ctx,
                _draw(shape, model, algorithm),
                rows,
                ctx.seed_for(self.id, "draw"),
                shape.nodes * shape.vocab,
                law.size,
                lambda tree, path, token: cells(
                    completed_sequences(model, emitted_sequences(tree, path, token), completion)
                ),
                sequential=decision,
                also=None if acceptance is None else acceptance.add,
            )
        except SamplerFault as fault:
            return [fault_result(d, fault) for d in self.decision_list()]
        drawn = int(counts.sum())
        test, pvalue, claim, expected, where = decision.gof(
            self.id, ctx, counts, lambda c: f"completed sequence cell {c}"
        )
        draws = "without replacement" if algorithm == WITHOUT_REPLACEMENT else "i.i.d. from the draft"
        lumped = self.case not in TREE_SHAPES
        evidence: Evidence = {
            "algorithm": algorithm,
            "candidates": draws,
            "test": test.method,
            "df": test.df,
            "statistic": test.statistic,
            "power": ctx.budget.power,
            "observed": counts.tolist(),
            "expected": expected.tolist(),
            "where": where,
            "length": length,
            "lumped": lumped,
            **decision.record(drawn),
        }
        if last_tree is not None and pvalue <= ctx.alpha and last_tree.vocab <= 64:
            evidence["tree_case"] = case_json(rows_slice(last_tree, 0))
        summary = (
            f"{drawn} calls on trees of {shape.nodes - 1} candidates drawn {draws} (V={shape.vocab:,}), the emitted "
            f"tokens completed to {length} against the target's "
            f"law{' (active tokens and a lumped tail)' if lumped else ''}; "
            f"{detects(test, claim, ctx.budget.power, TARGET_LAW)}"
        )
        result = law_result(
            self,
            ctx,
            test,
            pvalue,
            claim,
            drawn,
            evidence,
            summary,
            f"the emitted tokens do not follow the target's law: {where}",
            "loss",
            shape.large,
        )
        if acceptance is None:
            return result
        return [result, acceptance.result(ctx, tallied_with=self.id, planned=rows)]
