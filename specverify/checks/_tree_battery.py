"""The ``trees`` family as one list, cheapest and most decisive first (the checks live in
:mod:`specverify.checks._trees` and :mod:`specverify.checks._tree_acceptance`)."""

from __future__ import annotations

from ._base import Check, registered
from ._tree_acceptance import TreeAcceptanceCheck
from ._tree_cases import CONDITIONAL_KINDS, PRODUCTION_VOCABS, ROBUSTNESS_KINDS, TREE_SHAPES
from ._trees import TreeConditionalCheck, TreeGeneratedOutputCheck, TreeOutputCheck, TreeRobustnessCheck, TreeSupportCheck, TreeTargetLawCheck

__all__ = ["tree_battery"]


def tree_battery() -> list[Check]:
    """The ``trees`` family, cheapest and most decisive first."""
    return registered([
        TreeOutputCheck(),
        TreeSupportCheck(),
        TreeGeneratedOutputCheck(),
        *(TreeConditionalCheck(kind) for kind in CONDITIONAL_KINDS),
        *(TreeConditionalCheck(f"V={vocab}") for vocab in PRODUCTION_VOCABS),
        *(TreeTargetLawCheck(kind) for kind in TREE_SHAPES),
        *(TreeTargetLawCheck(f"V={vocab}") for vocab in PRODUCTION_VOCABS),
        *(TreeAcceptanceCheck(kind) for kind in TREE_SHAPES),
        *(TreeRobustnessCheck(kind) for kind in ROBUSTNESS_KINDS),
    ])
