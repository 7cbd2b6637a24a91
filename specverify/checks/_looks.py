"""Futility looks on one experiment's counts, for checks whose decisions share the experiment.

A check sized by a ``--tv`` budget draws its experiment in units (:mod:`specverify._calling.pool`)
and asks, at the first unit boundary at or past each look of its :class:`~specverify.stats.FutilityPlan`,
whether every decision's test is futile (:meth:`~specverify.stats.FutilityPlan.futile`); if so it
stops drawing.  Where the looks fall is fixed by the plan and the units alone, never by the counts,
so the plan's power holds (at most one look per planned look).  The decisions' claim is the whole
procedure's (:meth:`~specverify.stats.FutilityPlan.claim`), whether a look stopped them or not.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .._record.evidence import FutilityRecord
from ..stats import FutilityPlan, gof_test

if TYPE_CHECKING:
    from ._base import Context

__all__ = ["FutilityLooks", "budget_looks"]


@dataclasses.dataclass
class FutilityLooks:
    """The looks of one experiment of decisions ``laws [D, C]``, each tested at the plan's level:
    call it with the counts so far (``[D, C]``, every decision on as many samples), after each unit;
    it says whether to stop.  ``seed(look, decision)`` seeds a look's test (a Monte Carlo test is
    never futile, but its p-value is still drawn)."""

    plan: FutilityPlan
    laws: np.ndarray
    seed: Callable[[int, int], int]
    stopped_at: int | None = None  # samples a decision had where a look stopped them all
    _passed: int = 0  # looks reached so far

    def __call__(self, counts: np.ndarray) -> bool:
        samples = int(counts[0].sum())
        passed = bisect.bisect_right(self.plan.look_samples, samples)
        if passed == self._passed or samples >= self.plan.final_samples:
            return False  # no new look reached, or the final test's sample reached: no look there
        self._passed = passed
        look = passed - 1
        tests = (
            gof_test(counts[d], self.laws[d], alpha=self.plan.alpha, random_state=self.seed(look, d))
            for d in range(len(self.laws))
        )
        if all(self.plan.futile(test, law) for test, law in zip(tests, self.laws)):
            self.stopped_at = samples
            return True
        return False

    @classmethod
    def where_uncapped(
        cls, plan: FutilityPlan, laws: np.ndarray, seed: Callable[[int, int], int], *, per_decision: bool, cap: int
    ) -> FutilityLooks | None:
        """The looks of an experiment sized by ``plan``, where each decision may draw up to its own
        ``cap`` (``per_decision``: a ``--tv`` budget) and the plan's final sample fits it; ``None``
        otherwise: the fixed design, as large as the cap allows."""
        if not per_decision or plan.final_samples > cap:
            return None
        return cls(plan, laws, seed)

    def record(self) -> FutilityRecord:
        return {"looks": list(self.plan.look_samples), "final": self.plan.final_samples, "stopped_at": self.stopped_at}

    def text(self) -> str:
        if self.stopped_at is None:
            return f"no futility look stopped it (each decision ran to {self.plan.final_samples:,})"
        return f"stopped early by a futility look (at {self.stopped_at:,} of {self.plan.final_samples:,} a decision)"


def budget_looks(
    ctx: Context, plan: FutilityPlan, laws: np.ndarray, seed: Callable[[int, int], int]
) -> FutilityLooks | None:
    """An experiment's futility looks at this budget (``None``: the fixed design)."""
    return FutilityLooks.where_uncapped(
        plan, laws, seed, per_decision=ctx.budget.cap_per_decision, cap=ctx.budget.decision_cap()
    )
