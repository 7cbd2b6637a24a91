"""One family-wise false-positive budget for a whole run, split across its decisions.

Bonferroni is valid under any dependence between decisions and costs little: each tenfold cut in
alpha adds only 7-15% samples.  When the number of decisions is not known in advance the ``j``-th
decision gets ``total * 6 / (pi**2 * j**2)``, which sums to ``total`` however many there are.

A two-stage decision screens at a coarse level and, only on rejection, confirms on fresh samples.
With ``m`` screens at level ``a1`` and up to ``c`` confirmations, a false failure needs a screen
false alarm (probability <= ``m * a1``) *and* an independent false confirmation, so confirming at
``alpha / (c * m * a1)`` keeps the decision's false-positive rate at ``alpha`` while a correct
sampler pays only for the screens.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["AlphaBudget", "confirmation_alpha"]


@dataclasses.dataclass(frozen=True)
class AlphaBudget:
    """The family-wise false-positive probability of a run (default ``1e-4``)."""

    total: float = 1e-4

    def __post_init__(self) -> None:
        if not 0 < self.total < 1:
            raise ValueError(f"a false-positive budget must lie in (0, 1), got {self.total}")

    def split(self, decisions: int) -> float:
        """Bonferroni share of each of ``decisions`` decisions known in advance."""
        if decisions < 1:
            raise ValueError("split needs at least one decision")
        return self.total / decisions

    def spend(self, j: int) -> float:
        """Share of the ``j``-th (1-based) decision of an open-ended sequence."""
        if j < 1:
            raise ValueError("decisions are numbered from 1")
        return self.total * 6.0 / (math.pi**2 * j * j)


def confirmation_alpha(alpha: float, screens: int, screen_alpha: float, confirmations: int = 1) -> float:
    """Level for confirmations so a two-stage decision keeps false-positive rate ``alpha``."""
    screen_false_alarm = min(1.0, screens * screen_alpha)
    return min(0.5, alpha / (confirmations * screen_false_alarm))
