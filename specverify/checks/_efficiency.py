"""The efficiency family: accepted drafts per call against the canonical algorithm's expectation.

Fewer accepted drafts than the canonical algorithm's expectation, with the target's law intact, is
*lossless but suboptimal* (a verifier that samples the target and compares, one that drops the
bonus token, ...).  More accepted drafts is not the canonical algorithm either: for one draft the
canonical acceptance is the maximal coupling and more is a loss, but for several drafts a lossless
verifier can beat it (block verification), so it is reported as *non-canonical* and the target's
law, tested by the fit family, decides.  A sampler that declares ``canonical=False`` is expected
to differ, and only accepting fewer drafts is reported.

Both tails use Chernoff bounds with the exact law of the accepted count, valid however far in the
tail the decision level lies.  Each result states its power as a deficit: the smallest drop in
accepted drafts per call (``min_detectable_drop``, and as a share of the canonical expectation)
that its test detects with the budget's power (``power``), on ``samples`` calls.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .._calling.sut import SamplerUnderTest
from .._laws.cases import ModelCase
from .._laws.exact import emitted_law, sequence_offsets
from .._record.evidence import Evidence
from .._record.result import CheckResult
from ..errors import SamplerFault
from ..stats import mean_test
from ._base import Check, Context, check_id, fault_result, law_verdict
from ._fixtures import random_table_model, seed_chain_case
from ._tally import model_tally, plan_samples

__all__ = ["AcceptanceCheck", "accepted_law"]


def accepted_law(case: ModelCase) -> np.ndarray:
    """``[K+1]``: exact law of the number of accepted drafts, drafts drawn from the model."""
    law = emitted_law(case.model, case.k).numpy()
    offsets = sequence_offsets(case.vocab_size, case.k)
    return np.array([law[offsets[j] : offsets[j + 1]].sum() for j in range(case.k + 1)])


@dataclasses.dataclass
class AcceptanceCheck(Check):
    """Mean accepted drafts per call against the exact expectation."""

    case: str = "seed-chain"
    family: str = "efficiency"
    statistical: bool = True
    proves = "suboptimal"

    @property
    def id(self) -> str:
        return check_id(self.family, "acceptance", self.case)

    def model(self, ctx: Context) -> ModelCase:
        max_k = ctx.sut.capabilities.max_k or 4
        if self.case == "seed-chain":
            return seed_chain_case(k=min(4, max_k))
        return random_table_model(
            torch.Generator().manual_seed(ctx.seed_for(self.id)), 4, min(3, max_k), label=self.case
        )

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        return sut.capabilities.unsupported(k=1, vocab=4)

    def run(self, ctx: Context) -> CheckResult:
        case = ctx.model_as_passed(self.model(ctx))
        law = accepted_law(case)
        samples = plan_samples(ctx, case.k, ctx.alpha / 2)
        try:
            tally = model_tally(ctx, case, samples, ctx.seed_for(self.id, "tally"))
        except SamplerFault as fault:
            return fault_result(self, fault)
        values = np.repeat(np.arange(case.k + 1), tally.accepted)
        test = mean_test(values, law, alpha=ctx.alpha / 2, power=ctx.budget.power)
        detectable = test.min_detectable_drop
        assert detectable is not None  # mean_test was given alpha
        evidence: Evidence = {
            "expected_accepted": test.expected_mean,
            "observed_accepted": test.observed_mean,
            "ratio": test.ratio,
            "expected_law": law.tolist(),
            "observed_counts": tally.accepted.tolist(),
            "min_detectable_drop": detectable,
            "min_detectable_deficit": detectable / test.expected_mean if test.expected_mean > 0 else None,
            "power": ctx.budget.power,
            "pvalue_low": test.pvalue_low,
            "pvalue_high": test.pvalue_high,
        }

        def result(status: str, p_value: float, message: str, finding: str | None = None) -> CheckResult:
            if status == "fail":  # the same samples (seed, model, precision) and the same one-sided test
                side = "pvalue_low" if finding == "suboptimal" else "pvalue_high"
                evidence["repro"] = ctx.repro(
                    f"{case.to_code()}\nresult = specverify.replay.model_law_test(sampler, model, k, "
                    f"samples={samples}, seed={ctx.seed_for(self.id, 'tally')}, precision={case.precision!r}, "
                    f"law='accepted', alpha={ctx.alpha / 2!r})\n"
                    + law_verdict(self.id, ctx.alpha / 2, finding).replace("result.pvalue", f"result.accepted.{side}")
                )
            return CheckResult(
                id=self.id,
                family=self.family,
                case=self.case,
                alpha=ctx.alpha / 2,
                samples=tally.samples,
                evidence=evidence,
                status=status,
                finding=finding,
                p_value=p_value,
                message=message,
            )

        summary = (
            f"{test.observed_mean:.4f} accepted drafts per call, canonical {test.expected_mean:.4f} (ratio "
            f"{test.ratio:.4f}), {tally.samples} calls"
        )
        if not ctx.sut.capabilities.canonical:
            summary += " (canonical=False: measured against the canonical expectation, for comparison)"
        power = (
            f"a drop of {detectable:.3g} accepted drafts per call ({detectable / max(test.expected_mean, 1e-12):.2%} "
            f"of the canonical) is detected with probability >= {ctx.budget.power}"
        )
        if test.pvalue_low <= ctx.alpha / 2:
            return result(
                "fail",
                test.pvalue_low,
                f"accepts fewer drafts than the canonical algorithm: {summary}; {power}",
                "suboptimal",
            )
        if test.pvalue_high <= ctx.alpha / 2 and ctx.sut.capabilities.canonical:
            return result(
                "fail",
                test.pvalue_high,
                f"accepts more drafts than the canonical algorithm: {summary}",
                "non-canonical",
            )
        # A TV deviation t of the accepted count's law moves its mean by at most K t.
        ceiling = case.k * ctx.budget.ceiling_tv
        status = "pass" if detectable <= ceiling else "inconclusive"
        note = f"; {power}" + ("" if status == "pass" else f", above the budget's {ceiling:.3g}")
        return result(status, min(1.0, 2 * min(test.pvalue_low, test.pvalue_high)), summary + note)
