"""A progress bar for long runs: one line per check with rows sampled so far (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

__all__ = ["ProgressDisplay"]


class ProgressDisplay:
    """Overall checks done, and the sampler rows of the check under way."""

    def __init__(self, *, enabled: bool, console: Console) -> None:
        self.enabled = enabled
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[dim]{task.fields[rows]:,} rows"),
            TimeElapsedColumn(),
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

    def advance(self, planned: Any, rows: int) -> None:
        if not self.enabled:
            return
        if self._task is None:
            self._task = self._progress.add_task("checks", total=None, rows=0)
        if planned.id != self._current:
            self._current = planned.id
            self._progress.update(self._task, description=planned.id)
        self._rows += rows
        self._progress.update(self._task, rows=self._rows)

    def finished(self, result: Any) -> None:
        if self.enabled and self._task is not None:
            self._progress.advance(self._task)
