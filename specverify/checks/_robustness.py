"""Exact validity on cases where engines break: the support and robustness families.

No statistics: the audit of every output (:mod:`specverify._calling.sut`) either finds a broken rule or
does not.  Hypothesis searches each edge-case family and shrinks a failure to the smallest case.

* ``support.zero-target[kind]``: never a token of target probability 0 (zeros in p and q, disjoint
  supports, drafts the target forbids);
* ``robustness.<kind>``: near-equal laws, zero residual mass, low-precision inputs that do not sum
  to 1, one-hot laws: valid output, never NaN or an out-of-range id;
* ``robustness.large-vocab``: the same audit at vocabularies of 4k to 32k tokens.
"""

from __future__ import annotations

import dataclasses

import torch

from .. import strategies as sv
from .._calling.sut import SamplerUnderTest
from .._laws.cases import StepCase
from .._record.result import CheckResult
from ..errors import SamplerFault
from ._base import Check, Context, check_id, fault_result, step_cases_code
from ._fixtures import random_laws
from ._search import Outcome, search_and_confirm
from ._tally import step_counts

__all__ = ["EdgeValidityCheck", "LargeVocabCheck"]


@dataclasses.dataclass
class EdgeValidityCheck(Check):
    """Valid output on every generated case of one edge-case family."""

    family: str
    name: str
    case: str
    rows_per_case: int = 256
    max_vocab: int = 8
    max_k: int = 4
    statistical: bool = False

    @property
    def id(self) -> str:
        return check_id(self.family, self.name, self.case)

    @property
    def proves(self) -> str:
        return "support" if self.family == "support" else "contract"

    def run(self, ctx: Context) -> CheckResult:
        caps = ctx.sut.capabilities
        strategy = sv.step_batches(
            max_vocab=min(self.max_vocab, caps.max_vocab or self.max_vocab),
            max_k=min(self.max_k, caps.max_k or self.max_k),
            kind=self.case,
        )

        def evaluate(cases: list[StepCase], seed: int, alpha: float, stage: str) -> Outcome:
            cases = [ctx.as_passed(c) for c in cases]
            counts = step_counts(ctx, cases, self.rows_per_case, seed)
            return Outcome({}, int(counts.sum()), {})

        found = search_and_confirm(
            ctx,
            self.id,
            strategy,
            evaluate,
            lambda cases: ":".join(c.fingerprint() for c in cases),
            examples=ctx.budget.validity_examples,
            statistical=False,
        )
        samples = sum(o.samples for o in found.screens)
        if found.confirmed is not None:
            cases, outcome = found.confirmed
            assert outcome.fault is not None
            # every case, interleaved row by row in the batches and with the generator the check used:
            # the sampler is given what it failed on (raises specverify.SamplerFault the same way)
            repro = ctx.repro(
                f"{step_cases_code(cases)}\n"
                "# in the batches the sampler declares, every output audited (raises specverify.SamplerFault)\n"
                f"specverify.replay.step_law_test(sampler, cases, rows_per_case={self.rows_per_case}, "
                f"seed={outcome.seed or 0})\n"
                f"print({self.id!r} + ': not reproduced (every output valid)')"
            )
            result = fault_result(
                self,
                outcome.fault,
                evidence={
                    "minimal_example": {"cases": [c.describe() for c in cases]},
                    "repro": repro,
                    "examples": found.examples,
                },
            )
            result.message = f"on the smallest failing case: {result.message}"
            result.samples = samples
            return result
        return CheckResult(
            id=self.id,
            family=self.family,
            case=self.case,
            status="pass" if found.examples else "inconclusive",
            samples=samples,
            message=f"{found.examples} generated '{self.case}' cases, {samples} rows: every output valid",
            evidence={"examples": found.examples},
        )


@dataclasses.dataclass
class LargeVocabCheck(Check):
    """Valid output at LLM-like vocabulary sizes, peaked laws with long zero tails."""

    family: str = "robustness"
    case: str | None = "large-vocab"
    vocabularies: tuple[int, ...] = (4096, 32768)
    statistical: bool = False
    proves = "contract"

    @property
    def id(self) -> str:
        return check_id(self.family, "large-vocab")

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        return sut.capabilities.unsupported(k=2, vocab=min(self.vocabularies))

    def run(self, ctx: Context) -> CheckResult:
        rows = 0
        tested = []
        for vocab in self.vocabularies:
            if ctx.sut.capabilities.unsupported(k=2, vocab=vocab):
                continue
            tested.append(vocab)
            generator = torch.Generator().manual_seed(ctx.seed_for(self.id, vocab))
            batch, k = 16, 2
            # peaked: a few hundred live tokens, the rest exactly zero; draft shifted from target
            target = random_laws(generator, (batch, k + 1, vocab), zeros=0.97) ** 2
            draft = random_laws(generator, (batch, k, vocab), zeros=0.97) ** 2
            draft = draft + 0.5 * target[:, :k]
            drafts = torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, k)
            try:
                ctx.sut.step(
                    target, draft, drafts, generator=ctx.sut.generator(ctx.seed_for(self.id, "sampler", vocab))
                )
            except SamplerFault as fault:
                from ._shapes import remember_hang

                remember_hang(ctx, self.id, fault)  # the shapes family makes no call beside a hung one
                return fault_result(self, fault, evidence={"V": vocab})
            rows += batch
            ctx.advance(batch)
        return CheckResult(
            id=self.id,
            family=self.family,
            case=self.case,
            status="pass",
            samples=rows,
            message=f"valid output at V = {' and '.join(map(str, tested))} ({rows} rows)"
            + (
                f"; V above {tested[-1]} exceeds the sampler's max_vocab"
                if len(tested) < len(self.vocabularies)
                else ""
            ),
        )
