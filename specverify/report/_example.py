"""A failing case (``StepCase.describe()`` or ``ModelCase.describe()`` output) laid out for reading.

The dictionaries a check records are shown as what they are: scalars as a line of facts, vectors as
a row, probability matrices as tables with a labelled row per draft position and a column per
token, the drafted token of each row marked.  Anything else is shown as compact JSON, so a new
field in a case description is displayed rather than dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeGuard

from ._format import compact, number

__all__ = ["Example", "Matrix", "example", "probability", "shape_summary", "size_key"]

_SCALARS = (str, int, float, bool, type(None))
#: Keys the summary line already says.
_SUMMARISED = {"kind", "label", "precision", "K", "V", "B"}
#: Matrices larger than this are shown as JSON: a table of thousands of cells helps nobody.
MAX_CELLS = 400


@dataclasses.dataclass
class Matrix:
    """A numeric table: ``rows`` of formatted cells, with a label per row."""

    title: str
    row_labels: list[str]
    columns: int
    rows: list[list[str]]
    marked: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    zero: set[tuple[int, int]] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class Example:
    """One case: a summary line, its facts, its tables, nested cases, and what was left as JSON."""

    summary: str
    facts: list[tuple[str, str]]
    tables: list[Matrix]
    parts: list[Example]
    other: list[tuple[str, str]]


def example(description: Any) -> Example:
    """Lay out a case description (any JSON value; dictionaries get the structure)."""
    cases = description.get("cases") if isinstance(description, Mapping) else None
    if _is_case_list(cases) and len(cases) == 1 and len(description) == 1:
        return example(cases[0])
    if not isinstance(description, Mapping):
        return Example(
            summary=compact(description, 120),
            facts=[],
            tables=[],
            parts=[],
            other=[("value", compact(description, 4000))],
        )
    facts: list[tuple[str, str]] = []
    tables: list[Matrix] = []
    parts: list[Example] = []
    other: list[tuple[str, str]] = []
    drafts = description.get("draft_tokens")
    summary = shape_summary(description)
    for key, value in description.items():
        if key in _SUMMARISED and summary:
            continue
        if isinstance(value, _SCALARS):
            facts.append((str(key), number(value) if not isinstance(value, str) else value))
        elif _is_case_list(value):
            parts.extend(example(v) for v in value)
        elif (depth := _numeric_depth(value)) == 1:
            facts.append((str(key), "[" + ", ".join(probability(v) for v in value) + "]"))
        elif depth == 2 and _cells(value) <= MAX_CELLS:
            tables.append(_matrix(str(key), value, drafts))
        elif depth == 3 and _cells(value) <= MAX_CELLS:
            tables.extend(_matrix(f"{key}[{i}]", table, None) for i, table in enumerate(value))
        else:
            other.append((str(key), compact(value, 4000)))
    return Example(summary=summary, facts=facts, tables=tables, parts=parts, other=other)


def shape_summary(description: Any) -> str:
    """``"step case 'random': K=1, V=2, float64"``, or a count of cases, or ``""``."""
    if not isinstance(description, Mapping):
        return ""
    cases = description.get("cases")
    if _is_case_list(cases):
        inner = [shape_summary(c) for c in cases]
        return inner[0] if len(inner) == 1 else f"{len(inner)} cases: " + "; ".join(inner)
    kind, label, precision = description.get("kind"), description.get("label"), description.get("precision")
    head = (f"{kind} case" + (f" '{label}'" if label else "")) if kind else ""
    details = [f"{key}={description[key]}" for key in ("K", "V", "B") if isinstance(description.get(key), int)]
    if isinstance(precision, str):
        details.append(precision)
    if head and details:
        return f"{head}: {', '.join(details)}"
    return head or ", ".join(details)


def size_key(description: Any) -> tuple[int, int]:
    """(K, V) of the largest case in a description, for putting the smallest failure first."""
    if not isinstance(description, Mapping):
        return (1 << 30, 1 << 30)
    cases = description.get("cases")
    if _is_case_list(cases):
        return max((size_key(c) for c in cases), default=(1 << 30, 1 << 30))
    k, v = description.get("K"), description.get("V")
    return (k if isinstance(k, int) else 1 << 30, v if isinstance(v, int) else 1 << 30)


def _is_case_list(value: Any) -> TypeGuard[list[Mapping[str, Any]]]:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _numeric_depth(value: Any) -> int | None:
    """1 for a list of numbers, 2 for a rectangular list of such lists, 3 for a list of matrices."""
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return 1
    inner = [_numeric_depth(v) for v in value]
    if inner[0] is None or any(d != inner[0] for d in inner) or inner[0] >= 3:
        return None
    if inner[0] == 1 and len({len(v) for v in value}) != 1:
        return None
    return inner[0] + 1


def _cells(value: Any) -> int:
    return sum(_cells(v) for v in value) if isinstance(value, list) else 1


def _matrix(name: str, rows: list[list[float]], drafts: Any) -> Matrix:
    """Rows of a probability table; ``target_probs``/``draft_probs`` rows are draft positions."""
    prefix = {"target_probs": "p", "draft_probs": "q"}.get(name)
    labels = [f"{prefix}{i}" if prefix else str(i) for i in range(len(rows))]
    marked = set()
    if prefix and isinstance(drafts, list):
        marked = {
            (i, t) for i, t in enumerate(drafts) if isinstance(t, int) and i < len(rows) and 0 <= t < len(rows[i])
        }
    zero = {(i, j) for i, row in enumerate(rows) for j, v in enumerate(row) if v == 0}
    return Matrix(name, labels, len(rows[0]), [[probability(v) for v in row] for row in rows], marked, zero)


def probability(value: Any) -> str:
    """Four significant digits, or as many as it takes (up to 17) where four would round a value to
    exactly 1 or 0 that is not: 0.99999994 is not 1, and that difference is what a float edge is."""
    text = number(value, 4)
    if text in ("1", "0", "-0") and isinstance(value, float) and value not in (0.0, 1.0):
        for digits in range(5, 18):
            text = f"{value:.{digits}g}"
            if float(text) == value or text not in ("1", "0", "-0"):
                break
    return text
