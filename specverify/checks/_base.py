"""What a check is, and what it is given to run.

A check has a stable ``id`` (``family.name[case]``), says whether it spends false-positive budget
(``statistical``), may decline to run on a sampler (``skip_reason``), and turns a :class:`Context`
into one :class:`~specverify.CheckResult`.  Checks never import a sampler's library and never decide
the verdict: they report evidence and a finding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import torch

from .._budgets import Budget
from .._calling import SamplerFault, SamplerUnderTest
from .._cases import ModelCase, StepCase
from .._result import CheckResult
from .._seeds import derive_seed

__all__ = ["Check", "Context", "check_id", "fault_result"]

_PRECISION = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def check_id(family: str, name: str, case: str | None = None) -> str:
    return f"{family}.{name}" + (f"[{case}]" if case else "")


@dataclasses.dataclass
class Context:
    """Everything a check may use.

    Attributes:
        sut: the sampler, called safely.
        budget: how much evidence to gather.
        seed: the run seed every other seed derives from.
        alpha: this check's share of the run's false-positive budget (0 for exact checks).
        spec: the sampler's ``module:attribute`` spec, for repro snippets (``None`` if unknown).
        advance: progress callback, given a number of sampler rows.
    """

    sut: SamplerUnderTest
    budget: Budget
    seed: int
    alpha: float
    spec: str | None = None
    advance: Callable[[int], None] = lambda rows: None

    def seed_for(self, *parts: object) -> int:
        return derive_seed(self.seed, *parts)

    def dtype_for(self, precision: str) -> torch.dtype:
        """The dtype a case of this precision is passed in: its own if the sampler takes it."""
        wanted = _PRECISION[precision]
        dtypes = self.sut.capabilities.dtypes
        if wanted in dtypes:
            return wanted
        finer = [d for d in dtypes if torch.finfo(d).bits >= torch.finfo(wanted).bits]
        return finer[0] if finer else dtypes[0]

    def as_passed(self, case: StepCase) -> StepCase:
        """The case with its probabilities rounded exactly as the sampler will receive them.

        Expected laws are computed from these values, so a sampler that only takes bf16 is judged
        against the law of the bf16 numbers it was actually given.
        """
        dtype = self.dtype_for(case.precision)
        if dtype == torch.float64:
            return case
        return dataclasses.replace(
            case,
            target_probs=case.target_probs.to(dtype).to(torch.float64),
            draft_probs=case.draft_probs.to(dtype).to(torch.float64),
        )

    def model_as_passed(self, case: ModelCase) -> ModelCase:
        """A model case with its tables rounded as the sampler will receive them."""
        dtype = self.dtype_for(case.precision)
        return case if dtype == torch.float64 else case.rounded(dtype)

    def repro(self, body: str) -> str:
        """A snippet that rebuilds the inputs and loads the sampler."""
        spec = self.spec or "your.module:sampler"
        return f"import torch\nimport specverify\n\nsampler = specverify.load_sampler({spec!r})\n{body}"


class Check(Protocol):
    """A check of the battery.

    ``statistical`` checks spend ``decisions`` shares of the run's false-positive budget, one per
    result they report; exact checks spend none.
    """

    family: str
    statistical: bool
    decisions: int

    @property
    def id(self) -> str: ...

    @property
    def case(self) -> str | None: ...

    def skip_reason(self, sut: SamplerUnderTest) -> str | None: ...

    def run(self, ctx: Context) -> CheckResult | list[CheckResult]: ...


def fault_result(check: Any, fault: SamplerFault, *, evidence: dict[str, Any] | None = None) -> CheckResult:
    """A failing result for a sampler that raised, hung or broke its contract during a check."""
    v = fault.violation
    return CheckResult(
        id=check.id,
        family=check.family,
        case=check.case,
        status="fail",
        finding=v.finding,
        message=f"{v.rule}: {v.message}",
        evidence={"violation": v.rule, **(evidence or {})},
    )
