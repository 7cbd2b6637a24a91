"""A run's cost before it starts: the rows each check draws, their total, and a time estimated on
the sampler itself.

Every run's JSON holds the cheap count (:func:`plan_cost`): each statistical decision at the
budget's ``max_samples``, the cap one test of it is sized under, which is no estimate of rows below
TV 0.01 (decisions rarely reach their cap there, and several share one experiment).  ``--plan`` and
``--max-time`` ask for the real one (:func:`rehearsed_cost`): the checks are rehearsed against the
exact law (:mod:`._rehearsal`), so each is counted at the rows its own code will draw on a
conforming sampler, and each shape's rows are timed on the sampler, through the same tally code a
unit runs.  It is an estimate, labelled as such, not a bound: a failing sampler stops sooner, the
harness's own statistics and exact audits are not counted, and a check that cannot be rehearsed
(loops, trees) is counted at the cap, said per check.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from .._budgets import Budget
from ._plan import PlannedCheck
from ._rehearsal import rehearse, time_groups

__all__ = [
    "NOT_CALIBRATED",
    "Calibration",
    "CheckCost",
    "RunCost",
    "calibrate",
    "plan_cost",
    "rehearsed_cost",
    "sized_for",
]

#: The shape calibration calls run at: rows of a K=3 chain over V=64 (the battery's small-V cases).
CALIBRATION_SHAPE = (4_096, 3, 64)

#: How a check's samples were counted.
AT_CAP = "each statistical decision at max_samples (the cap of one test)"
SIZED = "the rows its own sample-size rule gives"
REHEARSED = "rehearsed: the rows its own code draws on a conforming sampler"


@dataclasses.dataclass(frozen=True)
class CheckCost:
    """One planned check's share of the cost: its statistical decisions, the samples it draws, the
    seconds they take (``None``: not estimated), and how the samples were counted."""

    id: str
    decisions: int
    samples: int
    skipped: bool
    seconds: float | None = None
    counted: str = AT_CAP


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The sampler's measured speed: seconds per sample row, and how it was measured."""

    seconds_per_row: float | None
    how: str


@dataclasses.dataclass(frozen=True)
class RunCost:
    """The plan's cost: per check, the total, and the estimated time (``None``: not measured)."""

    checks: list[CheckCost]
    calibration: Calibration
    workers: int = 1  # the samples are spread over this many sampler processes
    sized_for: str = ""  # what every decision is sized to detect, in words (:func:`sized_for`)

    @property
    def total_samples(self) -> int:
        return sum(c.samples for c in self.checks if not c.skipped)

    @property
    def estimated_seconds(self) -> float | None:
        if not self.rehearsed and self.calibration.seconds_per_row is None:
            return None  # nothing was timed
        seconds = [c.seconds for c in self.checks if not c.skipped and c.samples]
        return None if any(s is None for s in seconds) else sum(s or 0.0 for s in seconds)

    @property
    def rehearsed(self) -> bool:
        return any(c.counted == REHEARSED for c in self.checks)

    @property
    def how_counted(self) -> str:
        """How the samples were counted, in words: rehearsed, by the checks' own rule, or at the cap."""
        if self.rehearsed:
            return "as the checks draw them on a conforming sampler: rehearsed on the exact law"
        counted = {c.counted for c in self.checks if c.samples and not c.skipped}
        return "as each check's own sample-size rule gives them" if counted == {SIZED} else AT_CAP

    def to_json(self) -> dict[str, Any]:
        return {
            "samples_are": "rows each check draws on a conforming sampler, rehearsed against the exact law where it "
            "could be (each check says), an estimate"
            if self.rehearsed
            else self.how_counted + ", an estimate",
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "total_samples": self.total_samples,
            "estimated_seconds": self.estimated_seconds,
            "workers": self.workers,
            "calibration": dataclasses.asdict(self.calibration),
            "sized_for": self.sized_for,
        }

    def lines(self) -> list[str]:
        """The plan as printed by ``--plan``."""
        out = [f"{'check':<44} {'decisions':>9} {'samples':>15} {'est. seconds':>12}"]
        for c in self.checks:
            if c.skipped:
                out.append(f"{c.id:<44} {'skip':>9}")
            elif c.decisions or c.samples:
                shown = "?" if c.seconds is None else f"{c.seconds:,.1f}"
                mark = "" if c.counted == REHEARSED or not self.rehearsed else "  (at the cap: " + c.counted + ")"
                out.append(f"{c.id:<44} {c.decisions or 'exact':>9} {c.samples:>15,} {shown:>12}{mark}")
            else:
                out.append(f"{c.id:<44} {'exact':>9}")
        out.append(f"total: {self.total_samples:,} samples ({self.how_counted})")
        seconds = self.estimated_seconds
        timing = "not estimated" if seconds is None else f"about {seconds:,.0f} s"
        spread = f", units over {self.workers} workers" if self.workers > 1 else ""
        out.append(f"estimated time: {timing} (an estimate, not a bound{spread}); {self.calibration.how}")
        if self.sized_for:
            out.append(f"sized for: {self.sized_for}")
        return out


def sized_for(budget: Budget) -> str:
    """What a budget sizes each statistical decision for, in words: the TV, the power, the alpha."""
    return (
        f"budget {budget.name}: statistical decisions sized to detect TV {budget.tv:g} (the shapes family's, TV "
        f"{budget.shape_tv:g}) with probability {budget.power:g}, each where its cap allows; false-alarm probability "
        f"of the run <= {budget.alpha:g}"
    )


#: The calibration of a run that asked for no estimate (no --plan, no --max-time): no sampler call spent on it.
NOT_CALIBRATED = Calibration(None, "not calibrated (ask with --plan or --max-time)")


def plan_cost(
    planned: Sequence[PlannedCheck], budget: Budget, calibration: Calibration, *, workers: int = 1
) -> RunCost:
    """Each planned check's statistical decisions at the budget's ``max_samples`` each (the cap of
    one test), at ``calibration``'s speed spread over ``workers`` sampler processes."""
    return RunCost([_at_cap(p, budget, calibration, workers) for p in planned], calibration, workers, sized_for(budget))


def _at_cap(
    p: PlannedCheck, budget: Budget, calibration: Calibration, workers: int, counted: str = AT_CAP
) -> CheckCost:
    decisions = p.check.decisions if p.check.statistical else 0
    samples = decisions * budget.decision_cap()  # the sample size rule's cap of one decision
    own = p.check.planned_samples(budget, p.alpha)
    if own is not None:  # the check's own rule counts its rows without running
        samples, counted = own, SIZED
    rate = calibration.seconds_per_row
    seconds = None if rate is None else samples * rate / workers
    return CheckCost(p.id, decisions, samples, p.skip_reason is not None, seconds, counted)


def rehearsed_cost(
    planned: Sequence[PlannedCheck],
    subject: Any,
    budget: Budget,
    seed: int,
    *,
    spec: str | None = None,
    workers: int = 1,
) -> RunCost:
    """The plan's cost by rehearsal (:mod:`._rehearsal`): each check at the rows its own code draws
    on a conforming sampler, each shape's rows timed on ``subject``; a check that cannot be
    rehearsed is counted at the cap, at the speed of :func:`calibrate`."""
    if not subject.kind.rehearsed:
        return plan_cost(planned, budget, calibrate(subject), workers=workers)
    rehearsed = rehearse(planned, subject, budget, seed, spec=spec)
    try:
        how = time_groups(rehearsed, subject, there=workers > 1)  # several workers tally units in their own processes
    except Exception as exc:  # a sampler that refuses a timing call: no estimate, never a guess
        return plan_cost(
            planned,
            budget,
            Calibration(None, f"not calibrated: a timing call failed ({type(exc).__name__}: {exc})"),
            workers=workers,
        )
    fallback: Calibration | None = None
    checks = []
    for p, r in zip(planned, rehearsed):
        if r.why_not is None:
            decisions = p.check.decisions if p.check.statistical else 0
            checks.append(CheckCost(p.id, decisions, r.rows, p.skip_reason is not None, r.seconds(workers), REHEARSED))
        else:
            fallback = fallback or calibrate(subject)
            checks.append(_at_cap(p, budget, fallback, workers, f"{AT_CAP}; {r.why_not}"))
    return RunCost(checks, Calibration(None, how), workers, sized_for(budget))


def calibrate(subject: Any, *, calls: int = 3, shape: tuple[int, int, int] = CALIBRATION_SHAPE) -> Calibration:
    """Seconds per row of a few sampler calls at ``shape`` (rows, K, V), the fastest of ``calls``
    after one warm-up; a loop (called as itself) is not calibrated here."""
    import torch

    timed = subject.kind.seconds_per_row(subject)
    if timed is not None:
        return Calibration(*timed)
    if not subject.kind.calibrated:
        return Calibration(None, f"not calibrated: {subject.kind.called_as}'s speed is measured only on chain samplers")
    rows, k, vocab = shape
    gen = torch.Generator().manual_seed(0)
    target = torch.softmax(torch.randn(rows, k + 1, vocab, generator=gen), dim=-1)
    draft = torch.softmax(torch.randn(rows, k, vocab, generator=gen), dim=-1)
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=gen).reshape(rows, k)
    best = float("inf")
    for i in range(calls + 1):
        start = time.perf_counter()
        try:
            subject.step(target, draft, tokens, generator=torch.Generator().manual_seed(i))
        except Exception as exc:  # a sampler that refuses this shape: no estimate, never a guess
            return Calibration(
                None, f"not calibrated: the calibration call at K={k}, V={vocab} failed ({type(exc).__name__}: {exc})"
            )
        if i:  # the first call may compile or warm caches
            best = min(best, time.perf_counter() - start)
    how = (
        f"measured: fastest of {calls} calls of {rows:,} rows (K={k}, V={vocab}) after a warm-up, "
        f"{best / rows * 1e6:.2f} us a row"
    )
    return Calibration(best / rows, how)
