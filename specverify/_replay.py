"""Run one experiment of the battery by hand: what a failure's repro snippet calls.

:func:`step_law_test` and :func:`model_law_test` draw samples exactly as the checks do and set
them against the exact law, so a user can rerun the smallest failing case, change their kernel,
and rerun it again, in a test of their own.  :func:`call_sampler` makes one step as the harness
makes it: in the batches the sampler declares it takes, every output audited.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._budgets import get_budget
import torch

from ._calling import SamplerUnderTest
from ._cases import ModelCase, StepCase
from ._exact import emitted_law, target_law
from ._models import Model
from .checks._base import Context
from .checks._tally import model_tally, step_counts
from .stats import GoodnessOfFit, TVEstimate, gof_test, tv_estimate

__all__ = ["LawTest", "call_sampler", "model_law_test", "step_law_test"]


@dataclasses.dataclass(frozen=True)
class LawTest:
    """Observed against expected counts, the goodness-of-fit test and the TV estimate."""

    gof: GoodnessOfFit
    observed: np.ndarray
    expected: np.ndarray
    tv: TVEstimate

    @property
    def pvalue(self) -> float:
        return self.gof.pvalue

    def __str__(self) -> str:
        obs = np.atleast_2d(self.observed)
        exp = np.atleast_2d(self.expected)
        score = np.abs(obs - exp) / np.sqrt(np.maximum(exp, 1.0))
        order = np.dstack(np.unravel_index(np.argsort(-score, axis=None), score.shape))[0][:8]
        lines = [
            f"{self.gof.method}: statistic {self.gof.statistic:.4g}, df {self.gof.df}, p-value {self.gof.pvalue:.4g}, "
            f"samples {self.gof.samples}",
            f"TV estimate {self.tv.estimate:.4g} (99% interval {self.tv.low:.4g} .. {self.tv.high:.4g})",
            "largest deviations (group, cell: observed vs expected):",
        ]
        lines += [f"  {g}, {c}: {int(obs[g, c])} vs {exp[g, c]:.1f}" for g, c in order]
        return "\n".join(lines)


def call_sampler(
    sampler: Callable[..., Any],
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
    *,
    uniforms: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One verification step on a batch of any size, as the harness makes it.

    The batch is split as the sampler declares (``max_batch`` rows a call; one row a call if it is
    not ``batched``), the inputs are given in its first dtype, and every output is audited against
    the contract.

    Raises:
        SamplerFault: the sampler raised, hung, or returned what the contract forbids; its
            ``violation`` says which rule and the first row that shows it.
    """
    return SamplerUnderTest(sampler).step(target_probs, draft_probs, draft_tokens, generator=generator, uniforms=uniforms)


def _context(sampler: Callable[..., Any], seed: int) -> Context:
    sut = SamplerUnderTest(sampler)
    return Context(sut=sut, budget=get_budget("standard"), seed=seed, alpha=0.0)


def step_law_test(
    sampler: Callable[..., Any], cases: Sequence[StepCase], *, rows_per_case: int = 100_000, seed: int = 0
) -> LawTest:
    """Run fixed step inputs (interleaved in one batch) and test the law given the drafts."""
    ctx = _context(sampler, seed)
    cases = [ctx.as_passed(c) for c in cases]
    laws = np.stack([c.law().reshape(-1).numpy() for c in cases])
    counts = step_counts(ctx, cases, rows_per_case, seed)
    return LawTest(
        gof_test(counts, laws, alpha=1e-3, random_state=seed),
        counts,
        laws * rows_per_case,
        tv_estimate(counts, laws, random_state=seed),
    )


def model_law_test(
    sampler: Callable[..., Any],
    model: Model,
    k: int,
    *,
    samples: int = 100_000,
    seed: int = 0,
    law: str = "completed",
    precision: str = "float64",
) -> LawTest:
    """Draw drafts from ``model`` and test the emitted tokens.

    ``precision`` is the dtype the model's probabilities are passed in (as the failing check did).

    ``law="completed"``: completed to ``K + 1`` tokens with the target, against the target's joint
    law (every lossless sampler passes); ``law="emitted"``: the emitted sequences against the
    canonical algorithm's exact law.
    """
    ctx = _context(sampler, seed)
    case = ctx.model_as_passed(ModelCase(model, k, precision=precision))
    tally = model_tally(ctx, case, samples, seed)
    if law == "completed":
        expected, observed = target_law(case.model, k + 1).numpy(), tally.completed
    elif law == "emitted":
        expected, observed = emitted_law(case.model, k).numpy(), tally.emitted
    else:
        raise ValueError(f"law must be 'completed' or 'emitted', not {law!r}")
    return LawTest(
        gof_test(observed, expected, alpha=1e-3, random_state=seed),
        observed,
        expected * tally.samples,
        tv_estimate(observed, expected, random_state=seed),
    )
