"""The target's law at every shape the conditional checks use: ``fit.every-shape[random]``.

A different algorithm is lossless only where the target's law was seen to hold (see
:func:`specverify.judge`), and a ``canonical=False`` sampler is judged on the target's law alone,
so a target-law test must reach every ``(K, V)`` the conditional checks reach (``K <= 4``,
``V <= 8``), not only the small models the searching fit checks can afford.  The whole step of a
``V = 8, K = 4`` model has ``8**5`` outcomes, too many to test at the budget's TV; so each position
of the completed sequence is tested on its own (its marginal has ``V`` outcomes), on one fixed
random model per shape, Bonferroni over shapes and positions.  A sampler that breaks the target's
law at one shape only (a bug at ``K = 4``) moves some position's marginal there and fails here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from .._calling import SamplerFault, SamplerUnderTest
from .._exact import target_law
from .._result import CheckResult
from ..stats import gof_test, samples_needed, tv_estimate
from ._base import Context, check_id, fault_result
from ._fit import largest_deviation
from ._fixtures import random_table_model
from ._search import p_text
from ._sampling import model_tally

__all__ = ["EveryShapeCheck"]


@dataclasses.dataclass
class EveryShapeCheck:
    """Each position's law, completed by the target, on one random model per ``(K, V)``."""

    case: str = "random"
    max_vocab: int = 8
    max_k: int = 4
    family: str = "fit"
    statistical: bool = True
    decisions = 1
    proves = "loss"

    @property
    def id(self) -> str:
        return check_id(self.family, "every-shape", self.case)

    def shapes(self, sut: SamplerUnderTest) -> list[tuple[int, int]]:
        """``(K, V)`` pairs the sampler takes, smallest first."""
        return [
            (k, vocab)
            for k in range(1, self.max_k + 1)
            for vocab in range(2, self.max_vocab + 1)
            if sut.capabilities.unsupported(k=k, vocab=vocab) is None
        ]

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        return None if self.shapes(sut) else "no shape with K <= 4 and V <= 8 fits the sampler's declared limits"

    def run(self, ctx: Context) -> CheckResult:
        shapes = self.shapes(ctx.sut)
        tests = sum(k + 1 for k, _ in shapes)
        share = ctx.alpha / tests
        power = ctx.budget.power
        worst: dict[str, Any] | None = None
        claim, total = 0.0, 0
        try:
            for k, vocab in shapes:
                model = ctx.model_as_passed(random_table_model(torch.Generator().manual_seed(ctx.seed_for(self.id, k, vocab)), vocab, k, zeros=0.2))
                joint = target_law(model.model, k + 1).numpy().reshape((vocab,) * (k + 1))
                laws = np.stack([joint.sum(axis=tuple(a for a in range(k + 1) if a != i)) for i in range(k + 1)])
                df = int((laws > 0).sum(axis=1).max()) - 1
                samples = max(1, min(samples_needed(ctx.budget.tv, max(df, 1), share, power), ctx.budget.max_samples // len(shapes)))
                tally = model_tally(ctx, model, samples, ctx.seed_for(self.id, "tally", k, vocab))
                grid = tally.completed.reshape((vocab,) * (k + 1))
                observed = np.stack([grid.sum(axis=tuple(a for a in range(k + 1) if a != i)) for i in range(k + 1)])
                total += tally.samples
                for i in range(k + 1):
                    gof = gof_test(observed[i], laws[i], alpha=share, random_state=ctx.seed_for(self.id, "mc", k, vocab, i))
                    claim = max(claim, gof.min_detectable_tv(share, power))
                    if worst is None or gof.pvalue < worst["gof"].pvalue:
                        worst = {"gof": gof, "k": k, "vocab": vocab, "position": i, "observed": observed[i], "law": laws[i], "model": model}
        except SamplerFault as fault:
            return fault_result(self, fault)
        assert worst is not None  # at least one shape (skip_reason)
        gof = worst["gof"]
        pvalue = min(1.0, gof.pvalue * tests)
        expected = worst["law"] * worst["observed"].sum()
        where = f"K={worst['k']}, V={worst['vocab']}, position {worst['position']}; " + largest_deviation(
            worst["observed"], expected, lambda g, c: f"token {c}"
        )
        evidence: dict[str, Any] = {
            "test": gof.method,
            "df": gof.df,
            "statistic": gof.statistic,
            "shapes": [list(s) for s in shapes],
            "tests": tests,
            "where": where,
            "observed": np.atleast_2d(worst["observed"]).tolist(),
            "expected": np.atleast_2d(expected).tolist(),
            "outcome_labels": [str(t) for t in range(worst["vocab"])],
        }
        common = dict(id=self.id, family=self.family, case=self.case, p_value=pvalue, alpha=ctx.alpha, samples=total, min_detectable_tv=claim)
        if pvalue <= ctx.alpha:
            evidence["tv"] = dataclasses.asdict(tv_estimate(worst["observed"], worst["law"], random_state=0))
            evidence["minimal_example"] = worst["model"].describe()
            tv = evidence["tv"]
            return CheckResult(
                **common, status="fail", finding="loss", evidence=evidence,
                message=(
                    f"the emitted tokens do not follow the target's law ({p_text(pvalue)} <= {ctx.alpha:.3g}); "
                    f"estimated TV {tv['estimate']:.3g} [{tv['low']:.3g}, {tv['high']:.3g}]; {where}"
                ),
            )
        status = "inconclusive" if claim > ctx.budget.ceiling_tv else "pass"
        message = f"{len(shapes)} shapes (K 1-{max(k for k, _ in shapes)}, V 2-{max(v for _, v in shapes)}), {tests} positions: each follows the target's law"
        return CheckResult(**common, status=status, message=message, evidence=evidence)
