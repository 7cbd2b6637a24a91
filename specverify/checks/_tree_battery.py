"""The ``trees`` family as one list, cheapest and most decisive first (the checks live in
:mod:`specverify.checks._trees` and :mod:`specverify.checks._tree_target`, whose target-law
checks at the family's shapes report ``trees.acceptance[kind]`` too, tallied on the same rows)."""

from __future__ import annotations

from ._base import Check, registered
from ._tree_cases import CONDITIONAL_KINDS, PRODUCTION_VOCABS, ROBUSTNESS_KINDS, TREE_SHAPES
from ._tree_target import TreeTargetLawCheck
from ._trees import (
    TreeConditionalCheck,
    TreeGeneratedOutputCheck,
    TreeOutputCheck,
    TreeRobustnessCheck,
    TreeSupportCheck,
)

__all__ = ["tree_battery"]


def tree_battery() -> list[Check]:
    """The ``trees`` family, cheapest and most decisive first."""
    return registered(
        [
            TreeOutputCheck(),
            TreeSupportCheck(),
            TreeGeneratedOutputCheck(),
            *(TreeConditionalCheck(kind) for kind in CONDITIONAL_KINDS),
            *(TreeConditionalCheck(f"V={vocab}") for vocab in PRODUCTION_VOCABS),
            *(TreeTargetLawCheck(kind) for kind in TREE_SHAPES),  # each with trees.acceptance[kind] on its rows
            *(TreeTargetLawCheck(f"V={vocab}") for vocab in PRODUCTION_VOCABS),
            *(TreeRobustnessCheck(kind) for kind in ROBUSTNESS_KINDS),
        ]
    )
