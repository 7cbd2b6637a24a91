"""How numbers and values read in a report: the Jinja filters, also used by the view model.

Run JSON writes NaN and infinities as the strings ``"nan"``, ``"inf"`` and ``"-inf"``, and any value
may be missing, so every formatter takes anything and falls back to ``str``.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any

__all__ = [
    "FILTERS",
    "anchor",
    "compact",
    "count",
    "detects",
    "duration",
    "number",
    "pvalue",
    "slug",
    "timestamp",
    "visible",
]

_ABSENT = "–"


#: Bidirectional controls: in a sampler's text they could reorder what follows them on the page
#: ("Trojan Source"), so they are shown as their code points instead of obeyed.
_BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(value: Any) -> Any:
    """Text with bidirectional controls shown as ``<U+202E>``; other values unchanged.

    Applied to every value a template prints (Jinja's ``finalize``), before autoescaping.
    """
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return _BIDI_CONTROLS.sub(lambda m: f"<U+{ord(m.group()):04X}>", value)
    return value


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
        return float(value)
    return None


def number(value: Any, digits: int = 3) -> str:
    """``digits`` significant digits; integers as integers; anything else as text."""
    if value is None:
        return _ABSENT
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}".replace(",", "\u202f")
    x = _as_float(value)
    if x is None:
        return str(value)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{_digits(x, digits)}g}"


def _digits(x: float, digits: int) -> int:
    """``digits``, or more where rounding would make a non-integer read as an integer: 0.99999994
    is not "1" (a probability one ulp short of 1 is exactly the difference a table must show)."""
    while digits < 17 and not x.is_integer() and float(f"{x:.{digits}g}").is_integer():
        digits += 1
    return digits


def pvalue(value: Any) -> str:
    """A p-value: three significant digits; below what a double holds (an outcome the exact law
    forbids, a deviation far past any doubt) it reads as the bound ``< 1e-300``, never ``0``."""
    x = _as_float(value)
    if x is not None and 0.0 <= x < 1e-300:
        return "< 1e-300"
    return number(value, 3)


def detects(min_detectable_tv: Any, p_value: Any = None) -> str:
    """What a check's test detects, in words: never "TV ≥ 0".  A claim of 0 is an exact check (no
    p-value: any deviation) or a test that flags outcomes the exact law forbids (p-value 0)."""
    x = _as_float(min_detectable_tv)
    if x == 0:
        return "any deviation (exact)" if p_value is None else "any outcome of probability 0 (exact)"
    return f"TV ≥ {number(min_detectable_tv)}"


def count(value: Any) -> str:
    """A count with thin-space thousands separators."""
    x = _as_float(value)
    if x is not None and math.isfinite(x) and float(x).is_integer():
        return number(int(x))
    return number(value)


def duration(seconds: Any) -> str:
    """Seconds as ``0.4 s``, ``12 s`` or ``3 min 5 s``."""
    x = _as_float(seconds)
    if x is None or not math.isfinite(x):
        return _ABSENT
    if x < 10:
        return f"{x:.1f} s"
    if x < 60:
        return f"{x:.0f} s"
    minutes, rest = divmod(round(x), 60)
    return f"{minutes} min {rest} s"


def timestamp(value: Any) -> str:
    """An ISO 8601 time as ``2026-11-30 03:12 UTC`` (its own offset kept); anything else as text."""
    try:
        moment = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if moment.utcoffset() == datetime.timedelta(0):
        return moment.strftime("%Y-%m-%d %H:%M UTC")
    return moment.strftime("%Y-%m-%d %H:%M") + (moment.strftime(" %z") if moment.tzinfo else "")


def compact(value: Any, limit: int = 240) -> str:
    """A one-line rendering of any JSON value, floats to 4 significant digits, cut at ``limit``."""
    text = value if isinstance(value, str) else json.dumps(_rounded(value), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{_digits(value, 4)}g}") if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def slug(text: str) -> str:
    """Lower-case letters, digits, dots and dashes only: safe in file names and ids."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")


def anchor(check_id: str) -> str:
    """The page-internal id of a check."""
    return "check-" + (re.sub(r"[^a-z0-9]+", "-", check_id.lower()).strip("-") or "unnamed")


FILTERS = {
    "timestamp": timestamp,
    "number": number,
    "pvalue": pvalue,
    "count": count,
    "detects": detects,
    "duration": duration,
    "compact": compact,
    "anchor": anchor,
}
