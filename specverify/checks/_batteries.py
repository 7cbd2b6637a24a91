"""What a battery is: its checks and what they cover (:data:`specverify.checks.BATTERIES` lists them
by the name a kind gives its own, :attr:`specverify._kinds.Kind.battery`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ._base import Check

__all__ = ["TREES", "Battery", "engine_battery", "loop_battery", "loop_reach"]

#: The name of the tree family's battery: its checks run on a subject whose kind names it.
TREES = "trees"


@dataclasses.dataclass(frozen=True)
class Battery:
    """A battery's checks, and what its cases cover where the battery says so itself (``None``:
    its checks' results say; a run's record states it as ``run["reach"]``)."""

    checks: Callable[[], list[Check]]
    reach: Callable[[], str | None] = lambda: None


def loop_battery() -> list[Check]:
    """The loop family (imported late: it imports torch's models)."""
    from ._loop import loop_battery as checks

    return list(checks())


def loop_reach() -> str:
    """What the loop family's models and generations cover."""
    from ._loop import REACH

    return REACH


def engine_battery() -> list[Check]:
    """The engine family (imported late, as the loop family is)."""
    from ._engine import engine_battery as checks

    return list(checks())
