"""A progress bar for long runs (rich): checks done of the plan's total, or, where the plan was
rehearsed (``--max-time``), sampler rows done of the rows it counted, with percent, elapsed time and
an estimate of what is left weighed by each check's planned cost (:mod:`specverify._cli.eta`), and a
note while the harness waits on a slow call."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from .eta import Estimate, planned_costs

__all__ = ["ProgressDisplay"]


class _LeftColumn(ProgressColumn):
    """The estimate's time left, as H:MM:SS (``-:--:--`` until a check with any cost has finished)."""

    def __init__(self, display: ProgressDisplay) -> None:
        super().__init__()
        self._display = display

    def render(self, task: Task) -> Text:
        left = self._display.left()
        if left is None:
            return Text("-:--:--", style="progress.remaining")
        minutes, seconds = divmod(round(left), 60)
        hours, minutes = divmod(minutes, 60)
        return Text(f"{hours}:{minutes:02d}:{seconds:02d}", style="progress.remaining")


class ProgressDisplay:
    """Results done of the plan's total, the check under way, the time left, and a note on a slow call.

    Args:
        enabled: whether to draw at all.
        console: where.
        budget: the run's budget, for the plan's cost of each check (``None``: the time left is not shown).
    """

    def __init__(self, *, enabled: bool, console: Console, budget: Any = None) -> None:
        self.enabled = enabled
        self._budget = budget
        self._cost: Any = None  # a rehearsed plan's cost, where --plan or --max-time rehearsed it
        self._estimate: Estimate | None = None
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            MofNCompleteColumn(),
            TextColumn("[dim]{task.fields[rows]:,} rows"),
            TimeElapsedColumn(),
            TextColumn("[dim]left"),
            _LeftColumn(self),
            TextColumn("[yellow]{task.fields[note]}"),
            console=console,
            transient=True,
        )
        self._task: Any = None
        self._current: str | None = None
        self._rows = 0
        self._rows_planned: int | None = None  # the rehearsed plan's rows: the bar counts rows, not checks

    def __enter__(self) -> ProgressDisplay:
        if self.enabled:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._progress.stop()

    def expect(self, cost: Any) -> None:
        """The plan's cost, before the run: rehearsed, its rows become the bar's total."""
        if getattr(cost, "rehearsed", False) and cost.total_samples > 0:
            self._rows_planned = cost.total_samples
            self._cost = cost

    def plan(self, planned: list[Any]) -> None:
        """The total: the rehearsed plan's rows, else one step per result the plan will report."""
        if not self.enabled:
            return
        if self._budget is not None:
            self._estimate = Estimate(planned_costs(planned, self._budget, self._cost))
            self._estimate.begin(time.perf_counter())
        total = self._rows_planned or sum(len(p.check.decision_list()) for p in planned)
        self._task = self._progress.add_task("checks", total=total, rows=0, note="")

    def advance(self, planned: Any, rows: int) -> None:
        if not self.enabled:
            return
        if self._estimate is not None:
            self._estimate.advance(planned.id, rows, time.perf_counter())
        if self._task is None:
            self._task = self._progress.add_task("checks", total=None, rows=0, note="")
        if planned.id != self._current:
            self._current = planned.id
            self._progress.update(self._task, description=planned.id)
        self._rows += rows
        self._progress.update(self._task, rows=self._rows, note="")
        if self._rows_planned:
            self._progress.update(self._task, completed=min(self._rows, self._rows_planned))

    def waiting(self, seconds: float, limit: float) -> None:
        """The harness is waiting on one call of the sampler (seconds so far, its limit)."""
        if self.enabled and self._task is not None:
            self._progress.update(
                self._task, note=f"waiting on a slow sampler call: {seconds:.0f} s of {limit:.0f} s allowed"
            )

    def left(self) -> float | None:
        """Seconds the run has left, by the estimate (``None``: not known yet)."""
        return None if self._estimate is None else self._estimate.left(time.perf_counter())

    def finished(self, result: Any) -> None:
        if self._estimate is not None:
            self._estimate.result()
        if self.enabled and self._task is not None:
            self._progress.update(self._task, note="")
            if not self._rows_planned:
                self._progress.advance(self._task)
