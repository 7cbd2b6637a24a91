"""A progress bar for long runs (rich): checks done of the plan's total, or, where the plan was
rehearsed (``--max-time``), sampler rows done of the rows it counted, with percent, elapsed time and
an estimate of what is left, and a note while the harness waits on a slow call."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["ProgressDisplay"]


class ProgressDisplay:
    """Results done of the plan's total, the check under way, and a note on a slow call."""

    def __init__(self, *, enabled: bool, console: Console) -> None:
        self.enabled = enabled
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            MofNCompleteColumn(),
            TextColumn("[dim]{task.fields[rows]:,} rows"),
            TimeElapsedColumn(),
            TextColumn("[dim]left"),
            TimeRemainingColumn(),
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

    def plan(self, planned: list[Any]) -> None:
        """The total: the rehearsed plan's rows, else one step per result the plan will report."""
        if not self.enabled:
            return
        total = self._rows_planned or sum(len(p.check.decision_list()) for p in planned)
        self._task = self._progress.add_task("checks", total=total, rows=0, note="")

    def advance(self, planned: Any, rows: int) -> None:
        if not self.enabled:
            return
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

    def finished(self, result: Any) -> None:
        if self.enabled and self._task is not None:
            self._progress.update(self._task, note="")
            if not self._rows_planned:
                self._progress.advance(self._task)
