"""The contract family: what every sampler must do, whatever its law.

Exact checks (no false positives): the output audit (shapes, dtypes, padding, ranges, accepted
tokens equal the drafts, inputs unmodified), determinism under a seed, sensitivity to the seed, and
one-hot targets forcing their tokens.  Two statistical checks: outputs independent across
consecutive calls sharing a generator, and across the rows of one batch (including whether a row's
law depends on what the other rows hold).

Per-request seeds at the step level (:class:`RequestSeedsCheck`): a seeded row's output is a
function of its seed and inputs.  For a logits sampler that declares ``params=(..., "seeds")``
(engines' ``SamplingParams(seed=)``), three exact checks, each on rows of one small case whose
outcome law is known exactly (so every chance is computed, not guessed):

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
for requests without a seed, so the rest of the battery is unchanged.  A run of a sampler that
declares no seeds leaves these checks out (:meth:`RequestSeedsCheck.applies`, read by
:func:`specverify._run.plan`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy import stats

from .._calling.sut import SamplerUnderTest
from .._kinds import kind_of
from .._laws.cases import StepCase, tensor_code
from .._layout import StepInputs
from .._record.evidence import Evidence
from .._record.result import CheckResult
from ..errors import SamplerFault
from ..stats import homogeneity_test, independence_test
from ._base import Check, Context, check_id, fault_result
from ._fixtures import random_step_batch
from ._tally import adjacent_counts, plan_samples, step_counts

__all__ = [
    "FALSE_ALARM",
    "CallIndependenceCheck",
    "DeterminismCheck",
    "OneHotCheck",
    "OutputContractCheck",
    "RequestSeedsCheck",
    "RowIndependenceCheck",
    "SeedSensitivityCheck",
    "seed_checks",
]

# (batch, K, V, share of zero probabilities) of the audited calls.
_SHAPES = ((1, 1, 2, 0.0), (3, 2, 5, 0.0), (64, 4, 16, 0.3), (257, 3, 7, 0.5), (33, 1, 3, 0.0))


def _fits(sut: SamplerUnderTest, k: int, vocab: int) -> bool:
    return sut.capabilities.unsupported(k=k, vocab=vocab) is None


def _fitted(sut: SamplerUnderTest, k: int, vocab: int) -> tuple[int, int]:
    """The case size a check wants, cut to what the sampler declares it takes."""
    caps = sut.capabilities
    return min(k, caps.max_k or k), min(vocab, caps.max_vocab or vocab)


def _result(check: Any, status: str, message: str, **fields: Any) -> CheckResult:
    return CheckResult(id=check.id, family=check.family, case=check.case, status=status, message=message, **fields)


def _rich_case() -> StepCase:
    """One draft, four tokens, six outcomes of probability 1/8 to 2/7 each.

    No outcome is rare, so independence tables need no pooling, and two correct calls coincide
    on a row with probability 0.19 only (the seed check's chance of a false failure is computed).
    """
    target = torch.tensor([[0.30, 0.25, 0.25, 0.20], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    draft = torch.tensor([[0.10, 0.10, 0.40, 0.40]], dtype=torch.float64)
    return StepCase(target, draft, torch.tensor([3]), label="rich")  # accepted with probability 1/2


class _ContractCheck(Check):
    """What the contract checks share: their family, their id, the case size they need."""

    family = "contract"
    case: str | None = None
    statistical = False
    proves = "contract"
    name = ""
    needs: tuple[int, int] | None = None  # (K, V) of the check's own cases

    @property
    def id(self) -> str:
        return check_id(self.family, self.name)

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        if self.needs is not None and not _fits(sut, *self.needs):
            return f"needs K={self.needs[0]}, V={self.needs[1]}"
        return None


class OutputContractCheck(_ContractCheck):
    """Every output audited on a spread of shapes, zeros included."""

    name = "output"

    def run(self, ctx: Context) -> CheckResult:
        rows = calls = 0
        for index, (batch, k, vocab, zeros) in enumerate(_SHAPES):
            if not _fits(ctx.sut, k, vocab):
                continue
            generator = torch.Generator().manual_seed(ctx.seed_for(self.id, index))
            target, draft, drafts = random_step_batch(generator, batch, k, vocab, zeros=zeros)
            try:
                ctx.sut.step(
                    target, draft, drafts, generator=ctx.sut.generator(ctx.seed_for(self.id, "sampler", index))
                )
            except SamplerFault as fault:
                body = (
                    f"target_probs = {tensor_code(target)}\ndraft_probs = {tensor_code(draft)}\ndraft_tokens = "
                    f"{tensor_code(drafts)}\n"
                    "# in the batches the sampler declares, every output audited (raises specverify.SamplerFault)\n"
                    "tokens, num_accepted = specverify.replay.call_sampler(sampler, target_probs, draft_probs, "
                    "draft_tokens, torch.Generator().manual_seed(0))"
                )
                return fault_result(
                    self, fault, evidence={"shape": {"B": batch, "K": k, "V": vocab}, "repro": ctx.repro(body)}
                )
            rows += batch
            calls += 1
            ctx.advance(batch)
        if not calls:
            return _result(self, "skip", "no audited shape fits the sampler's declared limits")
        return _result(
            self,
            "pass",
            f"{calls} calls, {rows} rows audited: shapes, dtypes, padding, id ranges, accepted drafts, support, inputs "
            "unmodified",
            samples=rows,
        )


class DeterminismCheck(_ContractCheck):
    """Generators seeded alike give identical outputs."""

    name = "determinism"
    needs = (1, 2)

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        if not sut.capabilities.deterministic:
            return "the sampler declares deterministic=False"
        return super().skip_reason(sut)

    def run(self, ctx: Context) -> CheckResult:
        generator = torch.Generator().manual_seed(ctx.seed_for(self.id))
        k, vocab = _fitted(ctx.sut, 3, 6)
        target, draft, drafts = random_step_batch(generator, 256, k, vocab)
        seed = ctx.seed_for(self.id, "sampler")
        try:
            first = ctx.sut.step(target, draft, drafts, generator=ctx.sut.generator(seed))
            second = ctx.sut.step(target, draft, drafts, generator=ctx.sut.generator(seed))
        except SamplerFault as fault:
            return fault_result(self, fault)
        ctx.advance(512)
        differ = (first[0] != second[0]).any(-1) | (first[1] != second[1])
        if differ.any():
            row = int(differ.nonzero()[0, 0])
            return _result(
                self,
                "fail",
                f"two calls with generators seeded alike differ in {int(differ.sum())} of 256 rows (first: row {row}); "
                "the sampler ignores its generator or keeps state between calls",
                finding="contract",
                samples=512,
            )
        return _result(self, "pass", "identical outputs from identically seeded generators (256 rows)", samples=512)


class SeedSensitivityCheck(_ContractCheck):
    """Different seeds give different outputs (unless chance explains it, which is computed)."""

    name = "seed-sensitivity"
    needs = (1, 4)

    def run(self, ctx: Context) -> CheckResult:
        case = ctx.as_passed(_rich_case())
        law = case.law().reshape(-1)
        collision = float((law**2).sum())
        rows = max(16, math.ceil(math.log(1e-12) / math.log(collision)))
        target, draft, drafts = case.batch(rows)
        try:
            a = ctx.sut.step(target, draft, drafts, generator=ctx.sut.generator(ctx.seed_for(self.id, 1)))
            b = ctx.sut.step(target, draft, drafts, generator=ctx.sut.generator(ctx.seed_for(self.id, 2)))
        except SamplerFault as fault:
            return fault_result(self, fault)
        ctx.advance(2 * rows)
        chance = collision**rows
        if torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]):
            return _result(
                self,
                "fail",
                f"generators with different seeds gave identical outputs on all {rows} rows "
                f"(probability {chance:.2g} for a correct sampler): the seed is ignored",
                finding="contract",
                p_value=chance,
                samples=2 * rows,
            )
        return _result(self, "pass", f"different seeds, different outputs ({rows} rows)", samples=2 * rows)


class OneHotCheck(_ContractCheck):
    """A one-hot target forces every emitted token; exact."""

    name = "one-hot"
    needs = (1, 2)

    def run(self, ctx: Context) -> CheckResult:
        batch = 512
        k, vocab = _fitted(ctx.sut, 3, 5)
        generator = torch.Generator().manual_seed(ctx.seed_for(self.id))
        forced = torch.randint(0, vocab, (batch, k + 1), generator=generator)
        target = torch.nn.functional.one_hot(forced, vocab).to(torch.float64)
        _, draft, _ = random_step_batch(generator, batch, k, vocab)
        # drafts that agree with the forced token half of the time
        drafts = torch.where(
            torch.rand(batch, k, generator=generator) < 0.5,
            forced[:, :k],
            torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, k),
        )
        draft = torch.where(
            draft.gather(-1, drafts.unsqueeze(-1)) > 0, draft, draft + torch.nn.functional.one_hot(drafts, vocab)
        )
        mismatch = (drafts != forced[:, :k]).to(torch.int64)
        expected_accepted = torch.where(mismatch.any(-1), mismatch.argmax(-1), torch.full((batch,), k))
        try:
            tokens, accepted = ctx.sut.step(
                target, draft, drafts, generator=ctx.sut.generator(ctx.seed_for(self.id, "sampler"))
            )
        except SamplerFault as fault:
            return fault_result(self, fault)
        ctx.advance(batch)
        positions = torch.arange(k + 1)
        emitted = positions <= accepted[:, None]
        wrong = ((tokens != forced) & emitted).any(-1)
        if wrong.any():
            r = int(wrong.nonzero()[0, 0])
            return _result(
                self,
                "fail",
                f"row {r}: one-hot targets {forced[r].tolist()} with drafts {drafts[r].tolist()} force every emitted "
                f"token, but the sampler emitted {tokens[r].tolist()}; {int(wrong.sum())} of {batch} rows wrong",
                finding="contract",
                samples=batch,
            )
        # The canonical algorithm emits every forced token up to the first draft that differs; a
        # lossless verifier that stops earlier is suboptimal, which the efficiency family measures.
        shorter = int((accepted < expected_accepted).sum())
        note = f"; {shorter} rows stopped before the first mismatching draft (fewer accepted drafts)" if shorter else ""
        return _result(
            self, "pass", f"{batch} rows with one-hot targets emitted exactly the forced tokens{note}", samples=batch
        )


class CallIndependenceCheck(_ContractCheck):
    """Consecutive calls sharing one generator give independent outputs."""

    name = "call-independence"
    needs = (1, 4)
    statistical = True

    def run(self, ctx: Context) -> CheckResult:
        case = ctx.as_passed(_rich_case())
        law = case.law().reshape(-1).numpy()
        cells = int((law > 0).sum())
        df = (cells - 1) ** 2
        pairs = plan_samples(ctx, df, ctx.alpha)
        rows = min(4096, pairs)
        calls = max(2, math.ceil(pairs / rows) + 1)
        target, draft, drafts = case.batch(rows)
        generator = ctx.sut.generator(ctx.seed_for(self.id))
        outcomes = []
        try:
            for output in ctx.sut.steps(
                [(target, draft, drafts)] * calls, generator=generator
            ):  # consecutive calls are the point of this check
                outcomes.append(ctx.sut.layout.outcome(StepInputs(target, draft, drafts), output).numpy())
                ctx.advance(rows)
        except SamplerFault as fault:
            return fault_result(self, fault)
        outcomes_arr = np.stack(outcomes)
        repeats = [t for t in range(calls - 1) if np.array_equal(outcomes_arr[t], outcomes_arr[t + 1])]
        if repeats:
            chance = float((law**2).sum()) ** rows  # two correct calls coinciding on every row
            return _result(
                self,
                "fail",
                f"call {repeats[0] + 1} repeated call {repeats[0]}'s output on all {rows} rows "
                f"(probability {chance:.2g} for a correct sampler): the sampler reuses its randomness across calls",
                finding="contract",
                p_value=chance,
                samples=rows * calls,
            )
        test = independence_test(outcomes_arr[:-1].reshape(-1), outcomes_arr[1:].reshape(-1))
        claim = test.min_detectable_tv(ctx.alpha, ctx.budget.power)
        evidence: Evidence = {
            "statistic": test.statistic,
            "df": test.df,
            "cramers_v": test.cramers_v,
            "calls": calls,
            "rows": rows,
        }
        if test.pvalue <= ctx.alpha:
            return _result(
                self,
                "fail",
                f"outputs of consecutive calls depend on each other (G-test p = {test.pvalue:.3g}, Cramer's V "
                f"{test.cramers_v:.3g})",
                finding="contract",
                p_value=test.pvalue,
                alpha=ctx.alpha,
                samples=rows * calls,
                min_detectable_tv=claim,
                evidence=evidence,
            )
        return _result(
            self,
            "pass" if claim <= ctx.budget.ceiling_tv else "inconclusive",
            f"{calls} consecutive calls of {rows} rows: no dependence between calls",
            p_value=test.pvalue,
            alpha=ctx.alpha,
            samples=rows * calls,
            min_detectable_tv=claim,
            evidence=evidence,
        )


class RowIndependenceCheck(_ContractCheck):
    """Rows of one batch are independent, and a row's law ignores what the other rows hold.

    For a sampler that takes one row per call, adjacent rows are consecutive calls: their
    independence is tested, and there are no neighbours to vary.
    """

    name = "row-independence"
    needs = (1, 4)
    statistical = True

    def run(self, ctx: Context) -> CheckResult:
        caps = ctx.sut.capabilities
        one_per_call = not caps.batched or caps.max_batch == 1
        case = ctx.as_passed(_rich_case())
        law = case.law().reshape(-1).numpy()
        cells = int((law > 0).sum())
        alpha = ctx.alpha if one_per_call else ctx.alpha / 2
        power = ctx.budget.power
        # sized for the claims below, at the whole power: the pairs' test reaches the budget's TV, and
        # the neighbours' test twice its rows (its claim is twice its TV between joint and product)
        pairs = plan_samples(ctx, (cells - 1) ** 2, alpha, power=power)
        counts = []
        try:
            # 1. adjacent rows, same inputs: their joint counts, in units on the run's workers
            joint = adjacent_counts(ctx, case, pairs, ctx.seed_for(self.id, "pairs"))
            pair_test = homogeneity_test(joint)  # the G-test of independence of the pairs' table
            # 2. the same case beside two different neighbours, interleaved row by row
            rows = 0 if one_per_call else plan_samples(ctx, cells - 1, alpha, power=power, factor=2)
            for name in ("a", "b") if rows else ():
                both = step_counts(ctx, [case, _neighbour(case, ctx, name)], rows, ctx.seed_for(self.id, name))
                counts.append(both[0])
        except SamplerFault as fault:
            return fault_result(self, fault)
        evidence: Evidence = {
            "adjacent_rows": {"pvalue": pair_test.pvalue, "cramers_v": pair_test.cramers_v, "pairs": pair_test.samples},
            "tv_of": "joint law of adjacent rows against the product of its margins; law of a row beside two "
            "neighbours",
        }
        claim = pair_test.min_detectable_tv(alpha, power)
        pvalues = {"adjacent": pair_test.pvalue}
        if counts:
            mix_test = homogeneity_test(np.stack(counts))
            # TV between the two samples' laws is twice the TV of joint against product
            claim = max(claim, 2 * mix_test.min_detectable_tv(alpha, power))
            pvalues["neighbours"] = mix_test.pvalue
            evidence["neighbours"] = {"pvalue": mix_test.pvalue, "observed": [c.tolist() for c in counts]}
        p = min(1.0, len(pvalues) * min(pvalues.values()))
        samples = 2 * pairs + 4 * rows
        fields = dict(p_value=p, alpha=ctx.alpha, samples=samples, min_detectable_tv=claim, evidence=evidence)
        if p <= ctx.alpha:
            if pvalues["adjacent"] <= pvalues.get("neighbours", 1.0):
                what = (
                    "consecutive one-row calls depend on each other"
                    if one_per_call
                    else "adjacent rows of one batch depend on each other"
                )
            else:
                what = "a row's output law changes with what the other rows of its batch hold"
            return _result(self, "fail", f"{what} (p = {p:.3g})", finding="contract", **fields)
        status = "pass" if claim <= ctx.budget.ceiling_tv else "inconclusive"
        message = (
            "consecutive one-row calls independent"
            if one_per_call
            else "rows independent; a row's law unaffected by its neighbours"
        )
        return _result(self, status, message, **fields)


def _neighbour(case: StepCase, ctx: Context, name: str) -> StepCase:
    generator = torch.Generator().manual_seed(ctx.seed_for("neighbour", name))
    target, draft, drafts = random_step_batch(generator, 1, case.k, case.vocab_size)
    return ctx.as_passed(StepCase(target[0], draft[0], drafts[0], label=f"neighbour-{name}"))


# --- per-request seeds ---------------------------------------------------------------------------

#: The probability that a correct sampler fails ``different-seeds`` is at most this.
FALSE_ALARM = 1e-12
#: Rows (or row pairs) each check uses: a sampler ignoring seeds escapes with ``c**ROWS``.
ROWS = 64


@dataclasses.dataclass
class RequestSeedsCheck(Check):
    """One of the per-request seed checks (``case``: ``same-seed``, ``different-seeds``,
    ``batch-placement``); left out for samplers that declare no seeds."""

    case: str
    family = "contract"
    statistical = False
    proves = "contract"
    name = "seeds"

    def __post_init__(self) -> None:
        if self.case not in ("same-seed", "different-seeds", "batch-placement"):
            raise ValueError(f"no per-request seed check {self.case!r}")

    @property
    def id(self) -> str:
        return check_id(self.family, self.name, self.case)

    def applies(self, sut: SamplerUnderTest) -> bool:
        """A whole run plans these checks only for samplers that declare seeds."""
        return kind_of(sut).seeds

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        caps = sut.capabilities
        if not kind_of(sut).seeds:
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

    def _codes(self, ctx: Context, inputs: Sequence[torch.Tensor], seeds: torch.Tensor, generator: str) -> np.ndarray:
        target, draft, drafts = inputs
        output = ctx.sut.step(
            target, draft, drafts, seeds=seeds, generator=ctx.sut.generator(ctx.seed_for(self.id, generator))
        )
        ctx.advance(seeds.shape[0])
        return ctx.sut.layout.outcome(StepInputs(target, draft, drafts), output).numpy()

    def _same_seed(self, ctx: Context, case: StepCase, seeds: torch.Tensor, collision: float) -> CheckResult:
        shared = seeds[torch.arange(ROWS) // 2]  # rows 2i and 2i+1 share a seed
        first = self._codes(ctx, case.batch(ROWS), shared, "first")
        second = self._codes(ctx, case.batch(ROWS), shared, "second")
        escape = f"a sampler ignoring its seeds passes with probability {collision ** (ROWS // 2):.2g}"
        if not np.array_equal(first, second):
            row = int(np.flatnonzero(first != second)[0])
            return self._fail(
                f"row {row}: the same seed under another generator gave another output: the seeds are not what decides",
                2 * ROWS,
            )
        if not np.array_equal(first[0::2], first[1::2]):
            row = 2 * int(np.flatnonzero(first[0::2] != first[1::2])[0])
            return self._fail(
                f"rows {row} and {row + 1} share a seed in one batch but gave different outputs", 2 * ROWS
            )
        return self._pass(
            f"same seed, same output: across generators and within a batch ({ROWS} rows, twice; {escape})", 2 * ROWS
        )

    def _different_seeds(self, ctx: Context, case: StepCase, seeds: torch.Tensor, collision: float) -> CheckResult:
        codes = self._codes(ctx, case.batch(2 * ROWS), seeds, "batch")
        coincide = int((codes[0::2] == codes[1::2]).sum())
        # the smallest count whose upper tail under Binomial(ROWS, c) is at most FALSE_ALARM
        limit = int(stats.binom.isf(FALSE_ALARM, ROWS, collision)) + 1
        chance = float(stats.binom.sf(coincide - 1, ROWS, collision))
        told = (
            f"{coincide} of {ROWS} pairs of rows with different seeds coincide; the law allows up to {limit - 1} "
            f"(collision probability {collision:.3g} each, false alarm <= {FALSE_ALARM:g})"
        )
        if coincide >= limit:
            return self._fail(
                f"{told}: seeds are shared across rows (probability {chance:.2g} for a correct sampler)",
                2 * ROWS,
                p_value=chance,
            )
        return self._pass(told, 2 * ROWS)

    def _batch_placement(self, ctx: Context, case: StepCase, seeds: torch.Tensor, collision: float) -> CheckResult:
        mine = seeds[:ROWS]
        alone = self._codes(ctx, case.batch(ROWS), mine, "alone")
        # the same rows, shuffled, at odd positions beside other rows with other seeds
        order = torch.randperm(ROWS, generator=torch.Generator().manual_seed(ctx.seed_for(self.id, "order")))
        other = _neighbour(case, ctx, "seeds")
        pair = lambda a, b: torch.stack([a, b], dim=1).reshape(2 * ROWS, *a.shape[1:])  # noqa: E731 - interleave rows
        mixed = [pair(o, m) for o, m in zip(other.batch(ROWS), case.batch(ROWS))]
        moved = self._codes(ctx, mixed, pair(seeds[ROWS:], mine[order]), "moved")[1::2]
        if not np.array_equal(moved, alone[order.numpy()]):
            row = int(order[int(np.flatnonzero(moved != alone[order.numpy()])[0])])
            return self._fail(
                f"row {row}'s output changed when it moved to another position beside other rows: a seeded row depends "
                "on its place in the batch",
                3 * ROWS,
            )
        return self._pass(
            f"{ROWS} seeded rows keep their outputs moved and mixed with other rows (a position-dependent sampler "
            f"passes with probability {collision**ROWS:.2g})",
            3 * ROWS,
        )

    def _fail(self, message: str, samples: int, **fields) -> CheckResult:
        return CheckResult(
            id=self.id,
            family=self.family,
            case=self.case,
            status="fail",
            finding="contract",
            message=message,
            samples=samples,
            **fields,
        )

    def _pass(self, message: str, samples: int) -> CheckResult:
        return CheckResult(
            id=self.id, family=self.family, case=self.case, status="pass", message=message, samples=samples
        )


def seed_checks() -> list[RequestSeedsCheck]:
    """The three per-request seed checks."""
    return [RequestSeedsCheck(case) for case in ("same-seed", "different-seeds", "batch-placement")]
