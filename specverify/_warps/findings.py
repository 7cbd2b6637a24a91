"""The convention finding: which warp a run judged by, and how that warp differs from each preset.

"Speculation moves the law" decides a verdict; "this warp differs from preset X" never does: it
says what a user reading ``conformant`` needs to know (the law was the one *declared*, or
transformers' when nothing was declared) and how far the other engines' conventions are from it
on the separating cases (:mod:`specverify._warps.separating`).  A run records it as the JSON's
``run["warp"]`` (:func:`specverify._warps.separating.warp_record`, logits and loop runs alike);
:func:`warp_finding` reads that record back, so the command line and the HTML report say the same
thing in the same words.  This module imports no torch: the report reads records without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_PRESET", "PresetDifference", "WarpFinding", "warp_finding"]

#: The convention an undeclared sampler is judged by.
DEFAULT_PRESET = "transformers"

#: What the finding is, said where it is shown: it never decides the verdict.
INFORMATIVE = "informative, never the verdict: engines' conventions differ, speculation is not at issue"


@dataclasses.dataclass(frozen=True)
class PresetDifference:
    """The judged warp against one preset: the largest TV on the separating cases and the first
    case that separates them (``None``: the same law on every case)."""

    preset: str
    tv: float
    case: str | None

    @property
    def text(self) -> str:
        if self.case is None:
            return f"the same law as preset {self.preset!r} on every separating case"
        return f"differs from preset {self.preset!r} by TV {self.tv:.3g} on the separating cases, first at {self.case}"


@dataclasses.dataclass(frozen=True)
class WarpFinding:
    """A run's warp, read back from its record, in words."""

    name: str
    declared: bool
    preset: str | None
    differences: tuple[PresetDifference, ...]
    fault: str | None = None

    @property
    def judged(self) -> str:
        """Which law the run judged by: ``judged against vllm's warp (declared: vllm)``."""
        if not self.declared:
            return (
                f"judged against {DEFAULT_PRESET}' warp (undeclared: declare warp= to be judged by your engine's own)"
            )
        if self.preset is not None:
            return f"judged against {self.preset}'s warp (declared: {self.preset})"
        return f"judged against its own warp {self.name} (declared)"

    @property
    def differing(self) -> tuple[PresetDifference, ...]:
        """The presets whose law differs from the judged warp's on some separating case."""
        return tuple(d for d in self.differences if d.case is not None)

    @property
    def same(self) -> tuple[str, ...]:
        """The presets whose law is the judged warp's on every separating case."""
        return tuple(d.preset for d in self.differences if d.case is None)

    def lines(self) -> list[str]:
        """The finding as the command line prints it, under the verdict."""
        lines = [f"warp: {self.judged}"]
        if self.fault is not None:
            return [*lines, f"  the declared warp could not be compared with the presets: {self.fault}"]
        if self.differing:
            lines.append(f"convention finding ({INFORMATIVE}):")
            lines += [f"  {d.text}" for d in self.differing]
        if self.same:
            lines.append(f"  the same law as {', '.join(repr(p) for p in self.same)} on every separating case")
        return lines


def warp_finding(record: Any) -> WarpFinding | None:
    """The finding of a run's ``run["warp"]`` record (``None``: the run recorded no warp, a step
    or tree sampler given its laws as they are).  Tolerant of a record from another version: a
    field it lacks is left out, never guessed."""
    if not isinstance(record, Mapping) or not isinstance(record.get("name"), str):
        return None
    found = []
    for item in record.get("differences") or ():
        if (
            isinstance(item, Mapping)
            and isinstance(item.get("preset"), str)
            and isinstance(item.get("tv"), (int, float))
        ):
            case = item.get("case")
            found.append(PresetDifference(item["preset"], float(item["tv"]), case if isinstance(case, str) else None))
    preset = record.get("preset")
    fault = record.get("fault")
    return WarpFinding(
        record["name"],
        bool(record.get("declared")),
        preset if isinstance(preset, str) else None,
        tuple(found),
        fault if isinstance(fault, str) else None,
    )
