"""``fit.unnormalised[random]``: rows far from normalised, for samplers that declare they take them.

By default a sampler is given what engines give it: rows normalised as well as their dtype allows
(engine kernels do not renormalise, and need not).  A sampler that declares
``Capabilities(unnormalised=True)`` promises that a row stands for the row divided by its sum
whatever its scale; here every target and draft row is scaled by a factor far from 1
(:data:`~specverify.strategies._internal.pairs.FAR_SCALES`), and the law given the drafts is set
against the canonical law of the normalised rows.  A failure is its own finding,
``renormalisation`` ("does not renormalise its inputs"): the sampler broke what it declared, which
says nothing of its law on the rows engines pass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from .._calling import SamplerFault, SamplerUnderTest
from .._cases import StepCase
from .._result import CheckResult
from ..stats import gof_test, tv_estimate
from ..strategies._internal.pairs import FAR_SCALES
from ._base import Context, check_id, fault_result
from ._fit import largest_deviation, plan_samples
from ._fixtures import random_step_batch
from ._search import p_text
from ._sampling import step_counts

__all__ = ["RenormalisationCheck"]


@dataclasses.dataclass
class RenormalisationCheck:
    """The law given the drafts on rows scaled far from normalised, one fixed case per shape."""

    case: str = "random"
    shapes: tuple[tuple[int, int], ...] = ((1, 2), (2, 4), (3, 5), (4, 8))  # (K, V)
    family: str = "fit"
    statistical: bool = True
    decisions = 1
    proves = "renormalisation"

    @property
    def id(self) -> str:
        return check_id(self.family, "unnormalised", self.case)

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        caps = sut.capabilities
        if not caps.unnormalised:
            return "the sampler does not declare unnormalised=True: it is given rows normalised as well as their dtype allows, as engines pass them"
        if not caps.canonical:
            return "the sampler declares canonical=False: its law given the drafts is not the canonical one by design"
        if all(caps.unsupported(k=k, vocab=v) for k, v in self.shapes):
            return "no shape fits the sampler's declared limits"
        return None

    def cases(self, ctx: Context) -> list[StepCase]:
        """One random case per shape, every row scaled by a factor of :data:`FAR_SCALES`."""
        cases = []
        scales = torch.tensor(FAR_SCALES, dtype=torch.float64)
        for index, (k, vocab) in enumerate(self.shapes):
            if ctx.sut.capabilities.unsupported(k=k, vocab=vocab):
                continue
            generator = torch.Generator().manual_seed(ctx.seed_for(self.id, k, vocab))
            target, draft, drafts = random_step_batch(generator, 1, k, vocab, zeros=0.2)
            t_scale = scales[(torch.arange(k + 1) + index) % len(FAR_SCALES)][:, None]
            d_scale = scales[(torch.arange(k) + index + 1) % len(FAR_SCALES)][:, None]
            cases.append(ctx.as_passed(StepCase(target[0] * t_scale, draft[0] * d_scale, drafts[0], label="unnormalised")))
        return cases

    def run(self, ctx: Context) -> CheckResult:
        cases = self.cases(ctx)
        share = ctx.alpha / len(cases)
        tests, observed, laws = [], [], []
        try:
            for index, case in enumerate(cases):
                law = case.law().reshape(-1).numpy()
                rows = plan_samples(ctx, int((law > 0).sum()) - 1, share)
                counts = step_counts(ctx, [case], rows, ctx.seed_for(self.id, "rows", index))[0]
                tests.append(gof_test(counts, law, alpha=share, random_state=ctx.seed_for(self.id, "mc", index)))
                observed.append(counts)
                laws.append(law)
        except SamplerFault as fault:
            return fault_result(self, fault)
        worst = min(range(len(cases)), key=lambda g: tests[g].pvalue)
        gof, case = tests[worst], cases[worst]
        pvalue = min(1.0, gof.pvalue * len(cases))
        claim = max(t.min_detectable_tv(share, ctx.budget.power) for t in tests)
        vocab = case.vocab_size
        expected = laws[worst] * observed[worst].sum()
        sums = [round(float(s), 4) for s in case.target_probs.sum(-1)] + [round(float(s), 4) for s in case.draft_probs.sum(-1)]
        evidence: dict[str, Any] = {
            "test": gof.method,
            "df": gof.df,
            "statistic": gof.statistic,
            "row_sums": sums,
            "where": f"K={case.k}, V={vocab}; "
            + largest_deviation(observed[worst], expected, lambda g, c: f"outcome (accepted {c // vocab}, token {c % vocab})"),
        }
        common = dict(id=self.id, family=self.family, case=self.case, p_value=pvalue, alpha=ctx.alpha, samples=int(sum(o.sum() for o in observed)), min_detectable_tv=claim)
        if pvalue <= ctx.alpha:
            evidence["tv"] = dataclasses.asdict(tv_estimate(observed[worst], laws[worst], random_state=0))
            evidence["minimal_example"] = case.describe()
            evidence["repro"] = ctx.repro(
                f"{case.to_code()}\ncase = specverify.StepCase(target_probs, draft_probs, draft_tokens)\n"
                f"print(specverify.step_law_test(sampler, [case], rows_per_case={int(observed[worst].sum())}, seed=0))"
            )
            return CheckResult(
                **common, status="fail", finding="renormalisation", evidence=evidence,
                message=(
                    f"does not renormalise its inputs, though it declares unnormalised=True: on rows summing to {sums} "
                    f"the law given the drafts is not that of the normalised rows ({p_text(pvalue)} <= {ctx.alpha:.3g}); {evidence['where']}"
                ),
            )
        status = "inconclusive" if claim > ctx.budget.ceiling_tv else "pass"
        return CheckResult(**common, status=status, evidence=evidence, message=f"{len(cases)} cases with rows scaled by {list(FAR_SCALES)}: renormalised exactly")
