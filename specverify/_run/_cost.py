"""A run's cost before it starts: samples per decision, their total, and a time estimated from a
short calibration of the sampler's speed.

The checks size their samples as they run (their cases' vocabularies decide the degrees of
freedom), so the plan counts each statistical decision at the budget's ``max_samples``, the cap
one test of it is sized under.  That count, times the seconds per row measured on a few calls at a
small-V shape, is the estimate, labelled as such and with how it was measured.  It is not a bound
either way: most decisions need fewer samples than the cap (a small df reaches the TV sooner), a
searching check's screening examples draw more, large-V shapes cost more per row, and exact checks
(not counted) take time too.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from .._budgets import Budget
from .._kinds import ChainKind
from ._plan import PlannedCheck

__all__ = ["NOT_CALIBRATED", "Calibration", "CheckCost", "RunCost", "calibrate", "plan_cost"]

#: The shape calibration calls run at: rows of a K=3 chain over V=64 (the battery's small-V cases).
CALIBRATION_SHAPE = (4_096, 3, 64)


@dataclasses.dataclass(frozen=True)
class CheckCost:
    """One planned check's share of the cost: its statistical decisions, each at the cap of one test."""

    id: str
    decisions: int
    samples_per_decision: int
    skipped: bool

    @property
    def samples(self) -> int:
        return 0 if self.skipped else self.decisions * self.samples_per_decision


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

    @property
    def total_samples(self) -> int:
        return sum(c.samples for c in self.checks)

    @property
    def estimated_seconds(self) -> float | None:
        rate = self.calibration.seconds_per_row
        return None if rate is None else self.total_samples * rate / self.workers

    def to_json(self) -> dict[str, Any]:
        return {
            "samples_are": "each statistical decision counted at the budget's max_samples (the cap of one test), an estimate",
            "checks": [dataclasses.asdict(c) | {"samples": c.samples} for c in self.checks],
            "total_samples": self.total_samples,
            "estimated_seconds": self.estimated_seconds,
            "workers": self.workers,
            "calibration": dataclasses.asdict(self.calibration),
        }

    def lines(self) -> list[str]:
        """The plan as printed by ``--plan``."""
        out = [f"{'check':<44} {'decisions':>9} {'samples/decision':>17} {'samples':>15}"]
        for c in self.checks:
            if c.skipped:
                out.append(f"{c.id:<44} {'skip':>9}")
            elif c.decisions:
                out.append(f"{c.id:<44} {c.decisions:>9} {format(c.samples_per_decision, ','):>17} {c.samples:>15,}")
            else:
                out.append(f"{c.id:<44} {'exact':>9}")
        out.append(f"total: {self.total_samples:,} samples (each decision at max_samples, the cap of one test)")
        seconds = self.estimated_seconds
        timing = "not estimated" if seconds is None else f"about {seconds:,.0f} s"
        spread = f" / {self.workers} workers" if self.workers > 1 else ""
        out.append(f"estimated time (an estimate, not a bound: total samples x measured speed{spread}): {timing}; {self.calibration.how}")
        return out


#: The calibration of a run that asked for no estimate (no --plan, no --max-time): no sampler call spent on it.
NOT_CALIBRATED = Calibration(None, "not calibrated (ask with --plan or --max-time)")


def plan_cost(planned: Sequence[PlannedCheck], budget: Budget, calibration: Calibration, *, workers: int = 1) -> RunCost:
    """Each planned check's statistical decisions at the budget's ``max_samples`` each (the cap of
    one test), spread over ``workers`` sampler processes."""
    checks = [
        CheckCost(p.id, p.check.decisions if p.check.statistical else 0, budget.max_samples if p.check.statistical else 0, p.skip_reason is not None)
        for p in planned
    ]
    return RunCost(checks, calibration, workers)


def calibrate(subject: Any, *, calls: int = 3, shape: tuple[int, int, int] = CALIBRATION_SHAPE) -> Calibration:
    """Seconds per row of a few sampler calls at ``shape`` (rows, K, V), the fastest of ``calls``
    after one warm-up; a loop (called as itself) is not calibrated here."""
    import torch

    if not isinstance(subject.kind, ChainKind):
        return Calibration(None, f"not calibrated: a {subject.kind.name} subject's speed is measured only on chain samplers")
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
            return Calibration(None, f"not calibrated: the calibration call at K={k}, V={vocab} failed ({type(exc).__name__}: {exc})")
        if i:  # the first call may compile or warm caches
            best = min(best, time.perf_counter() - start)
    how = f"measured: fastest of {calls} calls of {rows:,} rows (K={k}, V={vocab}) after a warm-up, {best / rows * 1e6:.2f} us a row"
    return Calibration(best / rows, how)
