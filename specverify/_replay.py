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
import torch

from ._budgets import get_budget
from ._calling.sut import SamplerUnderTest
from ._laws.cases import ModelCase, StepCase
from ._laws.exact import emitted_law, target_law
from ._laws.models import Model
from .checks._base import Context
from .checks._tally import model_tally, step_counts
from .stats import GoodnessOfFit, MeanTest, TVEstimate, gof_test, mean_test, tv_estimate

__all__ = ["LawTest", "call_sampler", "model_law_test", "step_law_test"]


@dataclasses.dataclass(frozen=True)
class LawTest:
    """Observed against expected counts, the goodness-of-fit test and the TV estimate."""

    gof: GoodnessOfFit
    observed: np.ndarray
    expected: np.ndarray
    tv: TVEstimate
    #: each case's own test (:func:`step_law_test` with several cases), as the checks test them
    case_pvalues: tuple[float, ...] = ()
    #: ``law="accepted"``: the mean of accepted drafts per call against the canonical expectation,
    #: one-sided both ways (``pvalue_low``: fewer accepted), as ``efficiency.acceptance`` tests it
    accepted: MeanTest | None = None

    @property
    def pvalue(self) -> float:
        """The test's p-value; with several cases, the smallest case's times their number (Bonferroni),
        which is what the fit checks compare with their level."""
        if len(self.case_pvalues) > 1:
            return min(1.0, min(self.case_pvalues) * len(self.case_pvalues))
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
        if self.accepted is not None:
            a = self.accepted
            lines.append(
                f"accepted drafts per call {a.observed_mean:.4f}, canonical {a.expected_mean:.4f}; "
                f"p-value fewer {a.pvalue_low:.4g}, more {a.pvalue_high:.4g}"
            )
        if len(self.case_pvalues) > 1:
            lines.append(
                "each case's p-value: "
                + ", ".join(f"{p:.4g}" for p in self.case_pvalues)
                + f" (Bonferroni: {self.pvalue:.4g})"
            )
        return "\n".join(lines)


def call_sampler(
    sampler: Callable[..., Any],
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
    *,
    uniforms: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One verification step on a batch of any size, as the harness makes it.

    The batch is split as the sampler declares (``max_batch`` rows a call; one row a call if it is
    not ``batched``), the inputs are given in ``dtype`` (default: its first), and every output is audited against
    the contract.

    Raises:
        SamplerFault: the sampler raised, hung, or returned what the contract forbids; its
            ``violation`` says which rule and the first row that shows it.
    """
    return SamplerUnderTest(sampler).step(
        target_probs, draft_probs, draft_tokens, generator=generator, uniforms=uniforms, dtype=dtype
    )


def _context(sampler: Callable[..., Any], seed: int) -> Context:
    sut = SamplerUnderTest(sampler)
    return Context(sut=sut, budget=get_budget("standard"), seed=seed, alpha=0.0)


def step_law_test(
    sampler: Callable[..., Any],
    cases: Sequence[StepCase],
    *,
    rows_per_case: int = 100_000,
    seed: int = 0,
    alpha: float = 1e-3,
) -> LawTest:
    """Run fixed step inputs (interleaved in one batch, as the checks batch them) and test the law
    given the drafts: all cases in one test (``gof``), and each case on its own (``case_pvalues``).

    With the ``seed`` a failing check recorded in its repro, the sampler is given the same rows and
    generator, so it draws the same samples (or raises the same :class:`SamplerFault`).  ``alpha``
    is the level the p-value is compared with (it decides whether a Monte Carlo p-value resolves it).
    """
    ctx = _context(sampler, seed)
    cases = [ctx.as_passed(c) for c in cases]
    laws = np.stack([c.law().reshape(-1).numpy() for c in cases])
    counts = step_counts(ctx, cases, rows_per_case, seed)
    share = alpha / len(cases)
    each = tuple(gof_test(counts[g], laws[g], alpha=share, random_state=seed + g).pvalue for g in range(len(cases)))
    return LawTest(
        gof_test(counts, laws, alpha=alpha, random_state=seed),
        counts,
        laws * rows_per_case,
        tv_estimate(counts, laws, random_state=seed),
        each if len(cases) > 1 else (),
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
    position: int | None = None,
    alpha: float = 1e-3,
) -> LawTest:
    """Draw drafts from ``model`` and test the emitted tokens.

    ``precision`` is the dtype the model's probabilities are passed in (as the failing check did).

    ``law="completed"``: completed to ``K + 1`` tokens with the target, against the target's joint
    law (every lossless sampler passes); ``law="first-token"``: the first token of that sequence;
    ``law="position"``: the token at ``position`` (``0..K``) of it, on its own (its marginal, as
    ``fit.every-shape`` tests it); ``law="given-previous"``: the token at ``position`` (``1..K``) given
    the token before it (as ``fit.position`` tests it); ``law="emitted"``: the emitted sequences against the canonical
    algorithm's exact law; ``law="accepted"``: the number of accepted drafts against the canonical
    algorithm's law, and its mean (``accepted``).  ``alpha`` is the level the p-value is compared with.
    """
    ctx = _context(sampler, seed)
    case = ctx.model_as_passed(ModelCase(model, k, precision=precision))
    tally = model_tally(ctx, case, samples, seed)
    vocab = case.model.vocab_size
    if law == "completed":
        expected, observed = target_law(case.model, k + 1).numpy(), tally.completed
    elif law == "given-previous":
        if position is None or not 1 <= position <= k:
            raise ValueError(f"law='given-previous' needs a position in 1..{k}, not {position!r}")
        others = tuple(a for a in range(k + 1) if a not in (position - 1, position))
        expected = target_law(case.model, k + 1).numpy().reshape((vocab,) * (k + 1)).sum(axis=others)
        observed = tally.completed.reshape((vocab,) * (k + 1)).sum(axis=others)
    elif law in ("first-token", "position"):
        at = 0 if law == "first-token" else position
        if at is None or not 0 <= at <= k:
            raise ValueError(f"law='position' needs a position in 0..{k}, not {position!r}")
        others = tuple(a for a in range(k + 1) if a != at)
        expected = target_law(case.model, k + 1).numpy().reshape((vocab,) * (k + 1)).sum(axis=others)
        observed = tally.completed.reshape((vocab,) * (k + 1)).sum(axis=others)
    elif law == "emitted":
        expected, observed = emitted_law(case.model, k).numpy(), tally.emitted
    elif law == "accepted":
        from .checks._efficiency import accepted_law

        expected, observed = accepted_law(case), tally.accepted
        values = np.repeat(np.arange(k + 1), tally.accepted)
        return LawTest(
            gof_test(observed, expected, alpha=alpha, random_state=seed),
            observed,
            expected * tally.samples,
            tv_estimate(observed, expected, random_state=seed),
            accepted=mean_test(values, expected, alpha=alpha, power=ctx.budget.power),
        )
    else:
        raise ValueError(
            "law must be 'completed', 'first-token', 'position', 'given-previous', 'emitted' or 'accepted', not "
            f"{law!r}"
        )
    return LawTest(
        gof_test(observed, expected, alpha=alpha, random_state=seed),
        observed,
        expected * tally.samples,
        tv_estimate(observed, expected, random_state=seed),
    )
