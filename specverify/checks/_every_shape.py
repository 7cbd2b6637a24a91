"""``fit.every-shape[random]``: each position's law, completed by the target, at every ``(K, V)``
the conditional checks use, one random model per shape (a family member of :mod:`specverify.checks._fit`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from .._calling.sut import SamplerUnderTest
from .._laws.cases import ModelCase
from .._laws.exact import target_law
from .._record.evidence import Evidence, tv_record
from .._record.result import CheckResult
from ..errors import SamplerFault
from ..stats import FutilityPlan, gof_test, tv_estimate
from ._base import Check, Context, check_id, fault_result, law_verdict
from ._fixtures import random_table_model
from ._looks import FutilityLooks, budget_looks
from ._search import p_text
from ._tally import ModelTally, largest_deviation, model_tallies, model_tally

__all__ = ["EveryShapeCheck"]


def _positions(grid: np.ndarray) -> np.ndarray:
    """``[K + 1, V]``: each position's marginal of a ``(V,) * (K + 1)`` grid of completed sequences."""
    return np.stack([grid.sum(axis=tuple(a for a in range(grid.ndim) if a != i)) for i in range(grid.ndim)])


@dataclasses.dataclass
class EveryShapeCheck(Check):
    """Each position's law, completed by the target, on one random model per ``(K, V)``.

    A different algorithm is lossless only where the target's law was seen to hold (see
    :func:`specverify.judge`), and a ``canonical=False`` sampler is judged on the target's law alone,
    so a target-law test must reach every ``(K, V)`` the conditional checks reach (``K <= 4``,
    ``V <= 8``), not only the small models the searching fit checks can afford.  The whole step of a
    ``V = 8, K = 4`` model has ``8**5`` outcomes, too many to test at the budget's TV; so each
    position of the completed sequence is tested on its own (its marginal has ``V`` outcomes), on one
    fixed random model per shape, Bonferroni over shapes and positions.  A sampler that breaks the
    target's law at one shape only (a bug at ``K = 4``) moves some position's marginal there and
    fails here.
    """

    case: str = "random"
    max_vocab: int = 8
    max_k: int = 4
    family: str = "fit"
    statistical: bool = True
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

    def _shape(self, ctx: Context, k: int, vocab: int, share: float, shapes: int) -> _ShapePlan:
        """A shape's fixed random model, its positions' laws and its experiment's plan."""
        model = ctx.model_as_passed(
            random_table_model(torch.Generator().manual_seed(ctx.seed_for(self.id, k, vocab)), vocab, k, zeros=0.2)
        )
        joint = target_law(model.model, k + 1).numpy().reshape((vocab,) * (k + 1))
        laws = _positions(joint)
        df = max(1, int((laws > 0).sum(axis=1).max()) - 1)
        # a --tv budget's shape looks for futility after the units that pass each look
        plan = FutilityPlan(ctx.budget.tv, df, share, ctx.budget.power)
        looks = budget_looks(ctx, plan, laws, lambda j, d: ctx.seed_for(self.id, "look", k, vocab, j, d))
        samples = (
            plan.final_samples if looks is not None else ctx.budget.sample_size(df, share, decisions=shapes).samples
        )
        return _ShapePlan(k, vocab, model, joint, laws, plan, looks, samples)

    def run(self, ctx: Context) -> CheckResult:
        shapes = self.shapes(ctx.sut)
        tests = sum(k + 1 for k, _ in shapes)
        share = ctx.alpha / tests
        power = ctx.budget.power
        worst: dict[str, Any] | None = None
        claim, total = 0.0, 0
        looked: list[FutilityLooks | None] = []  # each shape's looks (None: its plan exceeds the cap)
        try:
            planned = [self._shape(ctx, k, vocab, share, len(shapes)) for k, vocab in shapes]
            experiments = [
                (shape.model, shape.samples, ctx.seed_for(self.id, "tally", shape.k, shape.vocab)) for shape in planned
            ]
            if all(shape.looks is None for shape in planned):  # the fixed design: every shape's units in one stream
                tallies: list[ModelTally | None] = list(model_tallies(ctx, experiments))
            else:  # a shape's looks decide, after each unit, whether its experiment goes on
                tallies = [None] * len(planned)
            for shape, experiment, tally in zip(planned, experiments, tallies):
                k, vocab, model, laws, plan, looks, samples = (
                    shape.k,
                    shape.vocab,
                    shape.model,
                    shape.laws,
                    shape.plan,
                    shape.looks,
                    shape.samples,
                )
                if tally is None:
                    tally = model_tally(ctx, *experiment, stop=None if looks is None else shape.futile)
                observed = _positions(tally.completed.reshape(shape.joint.shape))
                total += tally.samples
                looked.append(looks)
                for i in range(k + 1):
                    gof = gof_test(
                        observed[i], laws[i], alpha=share, random_state=ctx.seed_for(self.id, "mc", k, vocab, i)
                    )
                    claim = max(
                        claim, gof.min_detectable_tv(share, power) if looks is None else plan.claim(gof, laws[i])
                    )
                    if worst is None or gof.pvalue < worst["gof"].pvalue:
                        worst = {
                            "gof": gof,
                            "k": k,
                            "vocab": vocab,
                            "position": i,
                            "observed": observed[i],
                            "law": laws[i],
                            "model": model,
                            "samples": samples,
                            "seed": ctx.seed_for(self.id, "tally", k, vocab),
                        }
        except SamplerFault as fault:
            return fault_result(self, fault)
        assert worst is not None  # at least one shape (skip_reason)
        gof = worst["gof"]
        pvalue = min(1.0, gof.pvalue * tests)
        expected = worst["law"] * worst["observed"].sum()
        where = f"K={worst['k']}, V={worst['vocab']}, position {worst['position']}; " + largest_deviation(
            worst["observed"], expected, lambda g, c: f"token {c}"
        )
        evidence: Evidence = {
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
        if any(looked):
            evidence["futility_by_shape"] = [None if looks is None else looks.record() for looks in looked]
        common = dict(
            id=self.id,
            family=self.family,
            case=self.case,
            p_value=pvalue,
            alpha=ctx.alpha,
            samples=total,
            min_detectable_tv=claim,
        )
        if pvalue <= ctx.alpha:
            evidence["tv"] = tv_record(tv_estimate(worst["observed"], worst["law"], random_state=0))
            evidence["minimal_example"] = worst["model"].describe()
            model = worst["model"]
            evidence["repro"] = ctx.repro(
                f"{model.to_code()}\n# position {worst['position']} of the completed sequence on its own, at this "
                "shape's share of the level\n"
                f"result = specverify.replay.model_law_test(sampler, model, k, samples={worst['samples']}, "
                f"seed={worst['seed']}, precision={model.precision!r}, law='position', position={worst['position']}, "
                f"alpha={share!r})\n" + law_verdict(self.id, share, "loss")
            )
            tv = evidence["tv"]
            return CheckResult(
                **common,
                status="fail",
                finding="loss",
                evidence=evidence,
                message=(
                    f"the emitted tokens do not follow the target's law ({p_text(pvalue)} <= {ctx.alpha:.3g}); "
                    f"estimated TV {tv['estimate']:.3g} [{tv['low']:.3g}, {tv['high']:.3g}]; {where}"
                ),
            )
        status = "inconclusive" if claim > ctx.budget.ceiling_tv else "pass"
        message = (
            f"{len(shapes)} shapes (K 1-{max(k for k, _ in shapes)}, V 2-{max(v for _, v in shapes)}), {tests} "
            "positions: each follows the target's law"
        )
        if any(looked):
            stopped = sum(looks is not None and looks.stopped_at is not None for looks in looked)
            message += f"; futility looks stopped {stopped} of {len(looked)} shapes early"
        return CheckResult(**common, status=status, message=message, evidence=evidence)


@dataclasses.dataclass(frozen=True)
class _ShapePlan:
    """One shape of :class:`EveryShapeCheck`: its model, its positions' laws, its experiment's plan."""

    k: int
    vocab: int
    model: ModelCase
    joint: np.ndarray
    laws: np.ndarray
    plan: FutilityPlan
    looks: FutilityLooks | None
    samples: int

    def futile(self, so_far: ModelTally) -> bool:
        """Whether the shape's looks stop its experiment at the tally so far."""
        assert self.looks is not None
        return self.looks(_positions(so_far.completed.reshape(self.joint.shape)))
