"""One run's page."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._record.result import RunResult
from ._html import render, write_text
from ._view import run_view

__all__ = ["render_report", "write_report"]


def render_report(result: RunResult | Mapping[str, Any], *, plots: bool = True) -> str:
    """The HTML page of a run, from a :class:`~specverify.RunResult` or its JSON form.

    ``plots=False`` leaves out the observed-versus-expected plots (no matplotlib).
    """
    data = result.to_json() if isinstance(result, RunResult) else result
    return render("report.html.j2", v=run_view(data, plots=plots))


def write_report(result: RunResult | Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write a run's self-contained HTML page to ``path`` (parent folders are created)."""
    write_text(path, render_report(result))
