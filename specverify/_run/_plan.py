"""Planning a run: which checks of which battery run, why some skip, and each one's share of alpha.

One module for every face of the harness: the CLI and :func:`specverify._run._driver.check` (every
kind, loops included), the pytest plugin and :func:`specverify.pytest_battery`
(:mod:`specverify._pytest`) plan with it, through :class:`specverify._run.Run`, so a check's share
of the false-positive budget does not depend on which face, or which xdist worker, runs it.  It
lives above :mod:`specverify.checks` (the checks know nothing of plans).  Planning reads only what the
checks declare (:class:`~specverify.checks._base.Check`) and what the subject declares; it calls
no sampler.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable
from typing import Any

from .._budgets import Budget
from .._kinds import Kind, kind_of
from ..checks import BATTERIES, battery, tree_battery
from ..checks._base import Check
from ..errors import UsageError

__all__ = [
    "BATTERIES",
    "PlannedCheck",
    "battery_for",
    "battery_of",
    "check_selection",
    "left_out_among",
    "left_out_of",
    "no_match",
    "plan",
    "plan_checks",
    "result_ids",
    "selected",
    "selects",
    "skip_reason",
    "subject_kind",
]

#: Why a check that proves ``non-canonical`` skips on a sampler that declares ``canonical=False``.
NOT_CANONICAL = "the sampler declares canonical=False: its law given the drafts is not the canonical one by design"


@dataclasses.dataclass(frozen=True)
class PlannedCheck:
    """A check, whether it runs on this subject, and its share of the false-positive budget."""

    check: Check
    skip_reason: str | None
    alpha: float

    @property
    def id(self) -> str:
        return self.check.id


def subject_kind(sut: Any) -> Kind:
    """What the run layer asks of a subject under test, in one place: its kind
    (:func:`specverify._kinds.kind_of`: the one a sampler under test holds since it loaded)."""
    return kind_of(sut)


def battery_of(kind: Kind | type[Kind]) -> list[Check]:
    """The checks of the battery a kind names (:attr:`specverify._kinds.Kind.battery`,
    ``specverify.checks.BATTERIES``)."""
    return BATTERIES[kind.battery].checks()


def battery_for(sut: Any) -> list[Check]:
    """The battery of a subject's kind: the ``loop`` family for a generation loop, the ``trees``
    family for a tree sampler, else the chain battery."""
    return battery_of(subject_kind(sut))


def result_ids(check: Check) -> list[str]:
    """The ids of the results a check reports (one per decision)."""
    return [d.id for d in check.decision_list()]


def selects(pattern: str, check: Check) -> bool:
    """A family name, or a glob on the check's ids; ``[`` and ``]`` may be taken literally (ids
    contain them: ``fit.conditional[*]`` matches every conditional check) or as glob classes
    (``fit.conditional[[]random]``, as :func:`glob.escape` writes it)."""
    literal = pattern.replace("[", "\x00").replace("]", "[]]").replace("\x00", "[[]")
    ids = [check.id, *result_ids(check)]
    return pattern == check.family or any(fnmatch.fnmatchcase(i, p) for i in ids for p in (pattern, literal))


def selected(checks: Iterable[Check], select: Iterable[str] | None) -> list[Check]:
    """The checks ``select`` (patterns for :func:`selects`) names, in order; all of them without one."""
    patterns = list(select or [])
    return [c for c in checks if not patterns or any(selects(p, c) for p in patterns)]


def left_out_among(checks: Iterable[Check], select: Iterable[str] | None) -> list[str]:
    """The ids of the results of ``checks`` that ``select`` leaves out (none without a selection)."""
    patterns = list(select or [])
    return [i for c in checks if patterns and not any(selects(p, c) for p in patterns) for i in result_ids(c)]


def left_out_of(sut: Any, select: Iterable[str] | None) -> list[str]:
    """The ids of the results of ``sut``'s battery (trees or chains) that ``select`` leaves out."""
    return left_out_among(battery_for(sut), select)


def skip_reason(check: Check, sut: Any) -> str | None:
    """Why ``check`` does not run on ``sut``: a ``canonical=False`` sampler skips every check whose
    failure proves ``non-canonical``; else the check's own reason."""
    if check.proves == "non-canonical" and not sut.capabilities.canonical:
        return NOT_CANONICAL
    return check.skip_reason(sut)


def plan_checks(checks: list[Check], sut: Any, alpha: float) -> list[PlannedCheck]:
    """``checks`` planned on ``sut``, each statistical decision that runs with an equal (Bonferroni)
    share of ``alpha``; exact checks and skipped ones spend nothing.

    Checks whose ``applies(sut)`` is false are left out (the per-request seed checks of a sampler
    that declares no seeds), unless ``checks`` holds nothing else: then they skip with the reason.
    """
    checks = [c for c in checks if c.applies(sut)] or checks
    reasons = {c.id: skip_reason(c, sut) for c in checks}
    decisions = sum(c.decisions for c in checks if c.statistical and reasons[c.id] is None)
    share = alpha / max(1, decisions)
    return [PlannedCheck(c, reasons[c.id], share if c.statistical else 0.0) for c in checks]


def plan(sut: Any, budget: Budget, select: Iterable[str] | None = None) -> list[PlannedCheck]:
    """The checks of ``sut``'s battery to run, each with its Bonferroni share of ``budget.alpha``.

    ``select`` holds glob patterns on check ids or family names (``fit.*``, ``contract``); one that
    matches no check is a :class:`~specverify.UsageError`.
    """
    patterns = list(select or [])
    checks = selected(battery_for(sut), patterns)
    if not checks:
        raise UsageError(no_match(patterns, subject_kind(sut)))
    return plan_checks(checks, sut, budget.alpha)


def no_match(patterns: list[str], kind: Kind | type[Kind]) -> str:
    """What to say of a selection that matches no check of the battery of ``kind``."""
    return kind.no_match.format(patterns=patterns)


def check_selection(select: Iterable[str] | None) -> str | None:
    """Why a selection of checks is unusable (a pattern matches no check of any battery), or ``None``."""
    if not select:
        return None
    checks = [*battery(), *tree_battery()]
    missing = [p for p in select if not any(selects(p, c) for c in checks)]
    return (
        f"--only {missing[0]!r} matches no check (ids look like 'contract.output', 'fit.conditional[random]')"
        if missing
        else None
    )
