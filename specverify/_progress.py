"""A progress bar for long runs (rich): checks done of the plan's total, percent, sampler rows,
elapsed time and an estimate of what is left, and a note while the harness waits on a slow call."""

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

    def __enter__(self) -> ProgressDisplay:
        if self.enabled:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._progress.stop()

    def plan(self, planned: list[Any]) -> None:
        """The total: one step per result the plan will report."""
        if not self.enabled:
            return
        total = sum(len(p.check.decision_list()) for p in planned)
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

    def waiting(self, seconds: float, limit: float) -> None:
        """The harness is waiting on one call of the sampler (seconds so far, its limit)."""
        if self.enabled and self._task is not None:
            self._progress.update(self._task, note=f"waiting on a slow sampler call: {seconds:.0f} s of {limit:.0f} s allowed")

    def finished(self, result: Any) -> None:
        if self.enabled and self._task is not None:
            self._progress.update(self._task, note="")
            self._progress.advance(self._task)
