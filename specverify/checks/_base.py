"""What a check is, and what it is given to run.

Every check of every battery (chains, trees, loops) is a :class:`Check`: it has a stable ``id``
(``family.name[case]``), says whether it spends false-positive budget (``statistical``, in
``decisions`` shares), what its failure proves (``proves``), whether a run plans it for a sampler at
all (``applies``), why it may decline to run (``skip_reason``), which results it reports
(``decision_list``), and turns a context into those results (``run``).  Planning reads only these
(:mod:`specverify._run._plan`).  Checks never import a sampler's library and never decide the
verdict: they report evidence and a finding.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import torch

from .._budgets import Budget
from .._calling.pool import Pool, SerialPool, UnitDone
from .._calling.sut import SamplerUnderTest
from .._laws.cases import ModelCase, StepCase
from .._record.evidence import Evidence
from .._record.families import FAMILIES
from .._record.reach import Reach
from .._record.result import CheckResult
from .._seeds import derive_seed
from ..errors import SamplerFault

__all__ = ["Check", "Context", "Decision", "check_id", "fault_result", "law_verdict", "registered", "step_cases_code"]

_PRECISION = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


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
        pool: where experiments cut into units run (``None``: on ``sut``, one after another).
        reached: what the units gave the sampler, wherever they ran (merged into the check's reach).
    """

    sut: SamplerUnderTest
    budget: Budget
    seed: int
    alpha: float
    spec: str | None = None
    advance: Callable[[int], None] = lambda rows: None
    pool: Pool | None = None
    reached: list[Reach] = dataclasses.field(default_factory=list)

    def units(self, work: Callable[[Any, Any], Any], units: Iterable[Any]) -> Iterator[Any]:
        """``work(sut, unit)`` for each unit, on the run's workers, yielded in unit order
        (:mod:`specverify._calling.pool`); leaving the loop early drops the units in flight."""
        for done in self.map_units(work, units):
            yield done.result

    def map_units(self, work: Callable[[Any, Any], Any], units: Iterable[Any]) -> Iterator[UnitDone]:
        """As :meth:`units`, each result with what its unit gave the sampler (a check that reports
        several decisions from one stream of units tells their reaches apart)."""
        pool = self.pool if self.pool is not None else SerialPool(self.sut)
        for done in pool.map(work, units):
            if done.reach is not None:
                self.reached.append(done.reach)
            yield done

    @contextlib.contextmanager
    def at_tv(self, tv: float | None) -> Iterator[None]:
        """Within the block, the budget's TV is ``tv`` (``None``: unchanged): a search's coverage
        screens are sized for a coarser TV than its depth tier (``Budget.depth_examples``)."""
        kept = self.budget
        if tv is not None:
            self.budget = kept.with_(tv=tv)
        try:
            yield
        finally:
            self.budget = kept

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


def step_cases_code(cases: Sequence[StepCase]) -> str:
    """Python that builds every case, with its probabilities and precision, as the list ``cases``."""
    parts = []
    for i, case in enumerate(cases):
        parts.append(
            f"# case {i}\n{case.to_code()}\n"
            f"case{i} = specverify.replay.StepCase(target_probs, draft_probs, draft_tokens, label={case.label!r}, "
            f"precision={case.precision!r})"
        )
    return "\n".join(parts) + f"\ncases = [{', '.join(f'case{i}' for i in range(len(cases)))}]"


def law_verdict(check: str, alpha: float, finding: str | None) -> str:
    """The lines a statistical repro ends with: print the test, exit 1 (naming the check) where its
    p-value is at or below the level the check held it to, as the check failed."""
    what = f" (finding: {finding})" if finding else ""
    return (
        f"print(result)\nalpha = {alpha!r}  # the level the check held this test to\n"
        "if result.pvalue <= alpha:\n"
        f'    raise SystemExit(f"{check} fails{what}: p-value {{result.pvalue:.3g}} <= {{alpha:.3g}}")\n'
        f'print("{check}: not reproduced (p-value above the level)")'
    )


@dataclasses.dataclass(frozen=True)
class Decision:
    """One result a check reports: its id, and what its failure proves (``None``: not stated here)."""

    id: str
    family: str
    case: str | None
    finding: str | None = None


class Check(abc.ABC):
    """A check of a battery.

    ``family`` and ``case`` are set by each check (a class attribute or a dataclass field; the base
    gives them no default, so a dataclass field without one stays required).  ``statistical``
    checks spend ``decisions`` shares of the run's false-positive budget (default: one if
    statistical, none if exact); exact checks spend none.  The subject ``applies`` and
    ``skip_reason`` are given is what the battery tests: a
    :class:`~specverify._calling.sut.SamplerUnderTest` of the battery's kind (chain, logits, tree, loop);
    ``run`` is given a :class:`Context`, whatever the battery (a family may read it through a view
    of its own: the loop family's :class:`~specverify.checks._loop_context.LoopContext`).
    """

    family: str
    case: str | None

    @property
    @abc.abstractmethod
    def id(self) -> str:
        """``family.name[case]``: stable across runs and versions."""

    @property
    @abc.abstractmethod
    def statistical(self) -> bool:
        """Whether the check spends false-positive budget (a statistical test) or none (exact)."""

    @property
    def decisions(self) -> int:
        """Shares of the run's false-positive budget the check spends when it runs."""
        return 1 if self.statistical else 0

    @property
    def proves(self) -> str | None:
        """The finding a failure of the check proves (``None``: its results say)."""
        return None

    def applies(self, sut: Any) -> bool:
        """Whether a run plans the check for this subject at all (else it is left out, unless
        nothing else is selected: then it skips, saying why)."""
        return True

    def skip_reason(self, sut: Any) -> str | None:
        """Why the check cannot run on this subject, or ``None``: it runs."""
        return None

    def not_posed(self, sut: Any) -> list[str]:
        """What the subject's declared limits keep this check from posing, each in words (a tree
        sampler's ``max_children``, ...); the run's record lists them (``run.not_posed``)."""
        return []

    def planned_samples(self, budget: Budget, alpha: float) -> int | None:
        """The rows the check will draw at ``budget`` with its ``alpha`` share, where its own rule
        says so without running (an engine's checks); ``None``: the plan rehearses it or counts it
        at the cap."""
        return None

    def decision_list(self) -> list[Decision]:
        """The results the check reports, one each (default: one, the check's own id)."""
        return [Decision(self.id, self.family, self.case, self.proves)]

    def skipped(self, reason: str) -> list[CheckResult]:
        """One skip per result the check would have reported, counted apart from passes."""
        return [
            CheckResult(id=d.id, family=self.family, case=self.case, status="skip", message=reason)
            for d in self.decision_list()
        ]

    @abc.abstractmethod
    def run(self, ctx: Context) -> CheckResult | list[CheckResult]:
        """Gather the evidence and report one result per decision."""


C = TypeVar("C", bound=Check)


def registered(checks: list[C], families: Sequence[str] = FAMILIES) -> list[C]:
    """``checks``, once each is known to be of one of ``families`` (by default
    :data:`~specverify._record.families.FAMILIES`, which orders every report) and each id is unique (plans
    and results are keyed by id): a battery cannot drift from the families the reports know."""
    unknown = sorted({c.family for c in checks} - set(families))
    if unknown:
        raise ValueError(f"checks of families {unknown} not in {tuple(families)} (specverify/_record/families.py)")
    ids = [c.id for c in checks]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"check ids {twice} appear more than once in one battery")
    return checks


def fault_result(check: Check | Decision, fault: SamplerFault, *, evidence: Evidence | None = None) -> CheckResult:
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
