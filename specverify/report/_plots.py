"""Observed-versus-expected plots of a check's counts, as inline SVG.

Drawn with matplotlib's object-oriented API (a bare ``Figure``, never pyplot), so rendering a report
changes no global backend or state in the caller's process; settings apply only inside
``rc_context``.  Text and axes are drawn in :data:`~specverify.report._svg.INK`, which becomes the
page's text colour when inlined, so a plot reads in light and dark mode alike.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._record.evidence import Evidence
from ._format import visible
from ._svg import INK, inline_svg

__all__ = ["Comparison", "comparison", "comparison_svg"]

#: More outcomes than this are cut to the most deviant ones: a plot is for seeing where, not all.
MAX_BARS = 24
#: Tick labels longer than this are shortened, so that no label can swallow the figure.
MAX_LABEL = 20

_OBSERVED = "#3b82f6"
_IMPOSSIBLE = "#ef4444"
_EXPECTED = "#8b93a1"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Counts to compare, one bar per outcome, with what was left out."""

    observed: np.ndarray
    expected: np.ndarray
    labels: list[str]
    live_outcomes: int
    total_outcomes: int
    axis_label: str

    @property
    def note(self) -> str | None:
        """What the plot leaves out, in words, or ``None`` when it shows every outcome."""
        if len(self.labels) < self.live_outcomes:
            return (
                f"The {len(self.labels)} most deviant of {self.live_outcomes} outcomes that were expected or observed."
            )
        if self.live_outcomes < self.total_outcomes:
            return f"{self.total_outcomes - self.live_outcomes} outcomes neither expected nor observed are left out."
        return None


def comparison(evidence: Evidence) -> Comparison | None:
    """The observed and expected counts in a check's evidence, or ``None`` if it has none.

    Understands ``observed``/``expected`` (1-D, or 2-D: one row per case or per preceding token,
    labelled by ``outcome_labels`` when given) and ``observed_counts``/``expected_law`` (accepted
    drafts per call).  Values that do not form matching numeric arrays are ignored, not guessed at.
    """
    if "observed" in evidence and "expected" in evidence:
        observed, expected = _numeric(evidence["observed"]), _numeric(evidence["expected"])
        axis = "outcome"
        columns = evidence.get("outcome_labels")
    elif "observed_counts" in evidence and "expected_law" in evidence:
        observed, law = _numeric(evidence["observed_counts"]), _numeric(evidence["expected_law"])
        if observed is None or law is None or observed.shape != law.shape or observed.ndim != 1:
            return None
        expected = law / max(law.sum(), 1e-300) * observed.sum()
        axis = "accepted drafts per call"
        columns = [str(i) for i in range(observed.size)]
    else:
        return None
    if observed is None or expected is None or observed.shape != expected.shape or observed.ndim not in (1, 2):
        return None
    groups, width = (1, observed.size) if observed.ndim == 1 else observed.shape
    if not (isinstance(columns, Sequence) and not isinstance(columns, str) and len(columns) == width):
        columns = [str(c) for c in range(width)]
    labels = [f"{g}·{columns[c]}" if groups > 1 else str(columns[c]) for g in range(groups) for c in range(width)]
    observed, expected = observed.reshape(-1), expected.reshape(-1)
    live = np.flatnonzero((observed != 0) | (expected != 0))
    if live.size == 0:
        return None
    live_outcomes = int(live.size)
    if live.size > MAX_BARS:
        score = np.abs(observed[live] - expected[live]) / np.sqrt(np.maximum(expected[live], 1.0))
        live = np.sort(live[np.argsort(-score, kind="stable")[:MAX_BARS]])
    if groups > 1 and "outcome_labels" in evidence:
        axis = "case·outcome (a: accepted drafts, t: token)"
    elif "outcome_labels" in evidence:
        axis = "outcome (a: accepted drafts, t: token)"
    elif groups > 1:
        axis = "row·column"
    shown = [_shorten(labels[i]) for i in live]
    return Comparison(observed[live], expected[live], shown, live_outcomes, int(observed.size), axis)


def comparison_svg(data: Comparison, prefix: str, *, label: str) -> str:
    """Bars of expected counts (the exact law) with the observed counts over them, as inline SVG.

    Observed counts on outcomes the exact law forbids are drawn in red.
    """
    import matplotlib
    import matplotlib.style
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    n = len(data.labels)
    long_labels = n > 8 or max(len(s) for s in data.labels) > 4
    style: dict[Any, Any] = {  # matplotlib types its keys as a Literal of every rc name
        "svg.fonttype": "none",
        "svg.hashsalt": prefix,
        "font.size": 9,
        "text.color": INK,
        "axes.edgecolor": INK,
        "axes.labelcolor": INK,
        "xtick.color": INK,
        "ytick.color": INK,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.facecolor": "none",
        "axes.facecolor": "none",
        "savefig.transparent": True,
        "text.usetex": False,
    }
    # From matplotlib's defaults, not the caller's matplotlibrc: the same JSON gives the same plot.
    with matplotlib.style.context("default"), matplotlib.rc_context(style):
        # Fixed margins, no layout engine: one draw per figure keeps a report with many failures fast.
        longest = max(len(s) for s in data.labels)
        bottom = 0.5 + (0.05 * longest if long_labels else 0.0)
        width, height = max(4.0, min(8.0, 1.4 + 0.3 * n)), 1.9 + bottom
        figure = Figure(figsize=(width, height))
        figure.subplots_adjust(left=0.75 / width, right=1 - 0.15 / width, bottom=bottom / height, top=1 - 0.4 / height)
        axes = figure.add_subplot()
        x = np.arange(n)
        axes.bar(x, data.expected, width=0.8, color=_EXPECTED, alpha=0.35, edgecolor=_EXPECTED, linewidth=0.8)
        impossible = (data.expected == 0) & (data.observed > 0)
        colours = np.where(impossible, _IMPOSSIBLE, _OBSERVED)
        axes.bar(x, data.observed, width=0.42, color=list(colours))
        axes.set_xticks(
            x,
            data.labels,
            rotation=60 if long_labels else 0,
            ha="right" if long_labels else "center",
            fontsize=7.5 if long_labels else 9,
            parse_math=False,  # labels are data: a "$" is a dollar sign, never TeX
        )
        axes.set_xlim(-0.6, n - 0.4)
        axes.set_ylabel("count")
        axes.set_xlabel(data.axis_label, fontsize=8)
        axes.ticklabel_format(axis="y", style="plain")
        handles = [
            Patch(facecolor=_OBSERVED, label="observed"),
            Patch(facecolor=_EXPECTED, alpha=0.5, edgecolor=_EXPECTED, label="expected"),
        ]
        if impossible.any():
            handles.append(Patch(facecolor=_IMPOSSIBLE, label="impossible"))
        axes.legend(
            handles=handles,
            frameon=False,
            fontsize=7.5,
            loc="lower left",
            bbox_to_anchor=(0.0, 1.0),
            ncols=3,
            borderaxespad=0.2,
        )
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return inline_svg(buffer.getvalue(), prefix, label=label)


def _shorten(label: str) -> str:
    label = visible(label)
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"


def _numeric(value: Any) -> np.ndarray | None:
    """A finite float array from JSON lists, or ``None`` (ragged, non-numeric, empty, NaN or inf)."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if array.size == 0 or not np.isfinite(array).all():
        return None
    return array
