"""Per-request seeds at the step level: a seeded row's output is a function of its seed and inputs.

For a logits sampler that declares ``params=(..., "seeds")`` (engines' ``SamplingParams(seed=)``),
three exact checks of the ``contract`` family, each on rows of one small case whose outcome law is
known exactly (so every chance is computed, not guessed):

* ``contract.seeds[same-seed]``: the same seeds under two different generators, and two rows
  sharing a seed in one batch, give the same outputs (exact: a correct sampler never fails; a
  sampler that ignores the seeds passes only if every row coincides by chance, probability
  ``c**rows`` with ``c`` the law's collision probability, stated);
* ``contract.seeds[different-seeds]``: rows with different seeds collide no more often than the
  law allows: pairs of rows with distinct seeds coincide independently with probability ``c``, so
  the count of coinciding pairs is Binomial(pairs, c); more than its ``1e-12`` upper tail fails
  (one seed shared across the batch makes every pair coincide);
* ``contract.seeds[batch-placement]``: a row keeps its output when it moves to another position,
  beside other rows, under another generator (a seed offset by the row's position fails).

Without ``seeds`` given (every other check), such a sampler draws from its generator, as engines do
for requests without a seed, so the rest of the battery is unchanged.  A run of a sampler that declares
no seeds leaves these checks out (:func:`specverify._runner.plan`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from scipy import stats

from .._calling import SamplerFault, SamplerUnderTest
from .._cases import StepCase
from .._result import CheckResult
from ._base import Context, check_id, fault_result
from ._contract import _neighbour, _rich_case
from ._sampling import outcome_codes

__all__ = ["FALSE_ALARM", "RequestSeedsCheck", "seed_checks"]

#: The probability that a correct sampler fails ``different-seeds`` is at most this.
FALSE_ALARM = 1e-12
#: Rows (or row pairs) each check uses: a sampler ignoring seeds escapes with ``c**ROWS``.
ROWS = 64


class RequestSeedsCheck:
    """One of the per-request seed checks (``case``: ``same-seed``, ``different-seeds``,
    ``batch-placement``); skipped for samplers that declare no seeds."""

    family = "contract"
    statistical = False
    decisions = 0
    proves = "contract"
    name = "seeds"

    def __init__(self, case: str) -> None:
        if case not in ("same-seed", "different-seeds", "batch-placement"):
            raise ValueError(f"no per-request seed check {case!r}")
        self.case = case

    @property
    def id(self) -> str:
        return check_id(self.family, self.name, self.case)

    def applies(self, sut: SamplerUnderTest) -> bool:
        """A whole run plans these checks only for samplers that declare seeds."""
        return sut.capabilities.inputs == "logits" and "seeds" in sut.capabilities.params

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        caps = sut.capabilities
        if caps.inputs != "logits" or "seeds" not in caps.params:
            return "the sampler declares no per-request seeds (Capabilities(inputs='logits', params=(..., 'seeds')))"
        if caps.unsupported(k=1, vocab=4) is not None:
            return "needs K=1, V=4"
        return None

    def run(self, ctx: Context) -> CheckResult:
        case = ctx.as_passed(_rich_case())
        law = case.law().reshape(-1).numpy()
        collision = float((law**2).sum())
        seeds = torch.tensor([ctx.seed_for(self.id, "seed", i) for i in range(2 * ROWS)], dtype=torch.int64)
        try:
            return getattr(self, "_" + self.case.replace("-", "_"))(ctx, case, seeds, collision)
        except SamplerFault as fault:
            return fault_result(self, fault)

    def _codes(self, ctx: Context, case: StepCase, inputs: Sequence[torch.Tensor], seeds: torch.Tensor, generator: str) -> np.ndarray:
        target, draft, drafts = inputs
        tokens, accepted = ctx.sut.step(target, draft, drafts, seeds=seeds, generator=ctx.sut.generator(ctx.seed_for(self.id, generator)))
        ctx.advance(seeds.shape[0])
        return outcome_codes(tokens, accepted, case.vocab_size).numpy()

    def _same_seed(self, ctx: Context, case: StepCase, seeds: torch.Tensor, collision: float) -> CheckResult:
        shared = seeds[torch.arange(ROWS) // 2]  # rows 2i and 2i+1 share a seed
        first = self._codes(ctx, case, case.batch(ROWS), shared, "first")
        second = self._codes(ctx, case, case.batch(ROWS), shared, "second")
        escape = f"a sampler ignoring its seeds passes with probability {collision ** (ROWS // 2):.2g}"
        if not np.array_equal(first, second):
            row = int(np.flatnonzero(first != second)[0])
            return self._fail(f"row {row}: the same seed under another generator gave another output: the seeds are not what decides", 2 * ROWS)
        if not np.array_equal(first[0::2], first[1::2]):
            row = 2 * int(np.flatnonzero(first[0::2] != first[1::2])[0])
            return self._fail(f"rows {row} and {row + 1} share a seed in one batch but gave different outputs", 2 * ROWS)
        return self._pass(f"same seed, same output: across generators and within a batch ({ROWS} rows, twice; {escape})", 2 * ROWS)

    def _different_seeds(self, ctx: Context, case: StepCase, seeds: torch.Tensor, collision: float) -> CheckResult:
        codes = self._codes(ctx, case, case.batch(2 * ROWS), seeds, "batch")
        coincide = int((codes[0::2] == codes[1::2]).sum())
        # the smallest count whose upper tail under Binomial(ROWS, c) is at most FALSE_ALARM
        limit = int(stats.binom.isf(FALSE_ALARM, ROWS, collision)) + 1
        chance = float(stats.binom.sf(coincide - 1, ROWS, collision))
        told = f"{coincide} of {ROWS} pairs of rows with different seeds coincide; the law allows up to {limit - 1} (collision probability {collision:.3g} each, false alarm <= {FALSE_ALARM:g})"
        if coincide >= limit:
            return self._fail(f"{told}: seeds are shared across rows (probability {chance:.2g} for a correct sampler)", 2 * ROWS, p_value=chance)
        return self._pass(told, 2 * ROWS)

    def _batch_placement(self, ctx: Context, case: StepCase, seeds: torch.Tensor, collision: float) -> CheckResult:
        mine = seeds[:ROWS]
        alone = self._codes(ctx, case, case.batch(ROWS), mine, "alone")
        # the same rows, shuffled, at odd positions beside other rows with other seeds
        order = torch.randperm(ROWS, generator=torch.Generator().manual_seed(ctx.seed_for(self.id, "order")))
        other = _neighbour(case, ctx, "seeds")
        pair = lambda a, b: torch.stack([a, b], dim=1).reshape(2 * ROWS, *a.shape[1:])  # noqa: E731 - interleave rows
        mixed = [pair(o, m) for o, m in zip(other.batch(ROWS), case.batch(ROWS))]
        moved = self._codes(ctx, case, mixed, pair(seeds[ROWS:], mine[order]), "moved")[1::2]
        if not np.array_equal(moved, alone[order.numpy()]):
            row = int(order[int(np.flatnonzero(moved != alone[order.numpy()])[0])])
            return self._fail(
                f"row {row}'s output changed when it moved to another position beside other rows: a seeded row depends on its place in the batch",
                3 * ROWS,
            )
        return self._pass(
            f"{ROWS} seeded rows keep their outputs moved and mixed with other rows (a position-dependent sampler passes with probability {collision**ROWS:.2g})",
            3 * ROWS,
        )

    def _fail(self, message: str, samples: int, **fields) -> CheckResult:
        return CheckResult(id=self.id, family=self.family, case=self.case, status="fail", finding="contract", message=message, samples=samples, **fields)

    def _pass(self, message: str, samples: int) -> CheckResult:
        return CheckResult(id=self.id, family=self.family, case=self.case, status="pass", message=message, samples=samples)


def seed_checks() -> list[RequestSeedsCheck]:
    """The three per-request seed checks."""
    return [RequestSeedsCheck(case) for case in ("same-seed", "different-seeds", "batch-placement")]

