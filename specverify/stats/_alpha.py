"""One family-wise false-positive budget for a whole run, split across its decisions.

Bonferroni is valid under any dependence between decisions and costs little: each tenfold cut in
alpha adds only 7-15% samples.  When the number of decisions is not known in advance the ``j``-th
decision gets ``total * 6 / (pi**2 * j**2)``, which sums to ``total`` however many there are.

A two-stage decision screens at a coarse level and, only on an alarm, confirms on fresh samples.
With ``m`` screens at level ``a1`` and up to ``c`` confirmations, a false failure needs a screen
false alarm (probability <= ``m * a1``, however the screened cases were chosen) *and* an independent
false confirmation (<= ``c * a2`` given the alarm), so confirming at ``a2 = alpha / (c * m * a1)``
keeps the decision's false-positive rate at ``alpha`` while a correct sampler pays, almost always,
for the screens alone.  :func:`plan_two_stage` states what that saves against one stage.
"""

from __future__ import annotations

import dataclasses
import math

from ._power import samples_needed

__all__ = ["AlphaBudget", "TwoStagePlan", "confirmation_alpha", "plan_two_stage"]


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
    """Level for confirmations so a two-stage decision keeps false-positive rate ``alpha``.

    Capped at 0.5: a confirmation must still be evidence, even when screen alarms are frequent
    enough that the bound alone would allow more.
    """
    if screens < 1 or confirmations < 1:
        raise ValueError("a two-stage decision needs at least one screen and one confirmation")
    screen_false_alarm = min(1.0, screens * screen_alpha)
    return min(0.5, alpha / (confirmations * screen_false_alarm))


@dataclasses.dataclass(frozen=True)
class TwoStagePlan:
    """Levels and sample sizes of a two-stage decision, against a single stage with the same rates.

    Attributes:
        alpha: the decision's false-positive rate.
        power: probability of failing a sampler at the planned TV (both stages must reject).
        screens, screen_alpha: cases screened and their level.
        confirmations, confirm_alpha: confirmations allowed after an alarm and their level.
        screen_samples, confirm_samples: samples per screen and per confirmation (each stage has
            power ``sqrt(power)``).
        shrink_screens: extra screens spent after an alarm (shrinking a failure), if any.
        single_stage_samples: samples per case of one stage at ``alpha / screens`` with ``power``.
    """

    alpha: float
    power: float
    screens: int
    screen_alpha: float
    confirmations: int
    confirm_alpha: float
    screen_samples: int
    confirm_samples: int
    shrink_screens: int
    single_stage_samples: int

    @property
    def false_positive_bound(self) -> float:
        """``P(screen alarm) * P(false confirmation | alarm)``, the bound the plan keeps."""
        return min(1.0, self.screens * self.screen_alpha) * min(1.0, self.confirmations * self.confirm_alpha)

    @property
    def expected_samples_correct(self) -> float:
        """Expected samples for a correct sampler (an alarm costs shrinking and confirmations)."""
        alarm = min(1.0, self.screens * self.screen_alpha)
        after_alarm = self.shrink_screens * self.screen_samples + self.confirmations * self.confirm_samples
        return self.screens * self.screen_samples + alarm * after_alarm

    @property
    def cost_ratio(self) -> float:
        """Expected samples of a correct sampler, two stages over one."""
        return self.expected_samples_correct / (self.screens * self.single_stage_samples)


def plan_two_stage(
    tv: float,
    df: int,
    alpha: float,
    *,
    screens: int = 1,
    screen_alpha: float = 1e-3,
    power: float = 0.99,
    confirmations: int = 1,
    shrink_screens: int = 0,
) -> TwoStagePlan:
    """Plan a two-stage decision that detects ``tv`` with ``power`` at false-positive rate ``alpha``."""
    confirm_alpha = confirmation_alpha(alpha, screens, screen_alpha, confirmations)
    stage_power = math.sqrt(power)
    return TwoStagePlan(
        alpha=alpha,
        power=power,
        screens=screens,
        screen_alpha=screen_alpha,
        confirmations=confirmations,
        confirm_alpha=confirm_alpha,
        screen_samples=samples_needed(tv, df, screen_alpha, stage_power),
        confirm_samples=samples_needed(tv, df, confirm_alpha, stage_power),
        shrink_screens=shrink_screens,
        single_stage_samples=samples_needed(tv, df, alpha / screens, power),
    )
