"""Two samples, one law? The test for comparing an engine with speculation on against itself with it off.

Neither arm's law is known, so the one-sample tests (:func:`~specverify.stats.gof_test`) do not apply:
each group's two count vectors (speculation on, speculation off) form a ``2 x k`` table, and the
Williams-corrected G-test of homogeneity (:func:`~specverify.stats.homogeneity_test`, which pools rare
outcomes by their margins) decides whether its rows share a law.  Independent groups (a prefix each,
say) add their statistics and degrees of freedom.

Power.  With ``n_a`` and ``n_b`` samples and the arms' laws ``p`` and ``q`` at total variation ``tv``,
the statistic is noncentral chi-square with ``lambda = (n_a n_b / N) * sum((p - q)**2 / m)``, ``m`` the
pooled law and ``N = n_a + n_b``; Cauchy-Schwarz gives ``sum((p - q)**2 / m) >= 4 tv**2``, so

    ``lambda >= 4 tv**2 n_a n_b / N``,

and equal arms need ``lambda* / (2 tv**2)`` samples each: twice the one-sample test's
(:func:`~specverify.stats.samples_needed`), four times in all.  Over independent groups sampled in the
same proportions by both arms, the bound holds for the TV of the joint law (Jensen), which is what
:meth:`TwoSampleTest.min_detectable_tv` states.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import special

from ._independence import homogeneity_test
from ._power import noncentrality

__all__ = ["TwoSampleTest", "two_sample_min_tv", "two_sample_samples_needed", "two_sample_test"]


@dataclasses.dataclass(frozen=True)
class TwoSampleTest:
    """Result of :func:`two_sample_test`.

    Attributes:
        statistic: the Williams-corrected G of homogeneity, summed over groups.
        pvalue: its chi-square p-value (1 where no group had two outcomes to compare).
        df: degrees of freedom, summed over groups.
        samples: observations in each arm, ``(n_a, n_b)``.
        groups: groups that contributed (those with an outcome to compare).
        pooled_mass: share of the observations in pooled outcomes: a difference confined to them is
            invisible, so it adds to the smallest detectable TV.
    """

    statistic: float
    pvalue: float
    df: int
    samples: tuple[int, int]
    groups: int
    pooled_mass: float = 0.0

    def min_detectable_tv(self, alpha: float, power: float = 0.99) -> float:
        """Smallest TV between the arms' laws detected with ``power`` at level ``alpha``."""
        if self.df < 1:
            return 1.0
        return min(1.0, two_sample_min_tv(*self.samples, self.df, alpha, power) + self.pooled_mass)


def two_sample_test(a: np.ndarray, b: np.ndarray) -> TwoSampleTest:
    """Whether counts ``a`` and ``b`` (``[C]``, or ``[G, C]`` for ``G`` independent groups) share a law."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim not in (1, 2):
        raise ValueError(f"the arms' counts must be [C] or [G, C] of one shape, got {a.shape} and {b.shape}")
    if (a < 0).any() or (b < 0).any():
        raise ValueError("counts must be non-negative")
    a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    statistic, df, groups, pooled = 0.0, 0, 0, 0.0
    for row_a, row_b in zip(a2, b2):  # loops over groups, never over samples
        if row_a.sum() == 0 or row_b.sum() == 0:
            continue
        test = homogeneity_test(np.stack([row_a, row_b]))
        if test.df < 1:
            continue
        statistic += test.statistic
        df += test.df
        groups += 1
        pooled += test.pooled_mass * test.samples
    samples = (int(a2.sum()), int(b2.sum()))
    total = sum(samples)
    pvalue = float(special.chdtrc(df, statistic)) if df else 1.0
    return TwoSampleTest(statistic, pvalue, df, samples, groups, pooled / total if total else 0.0)


def two_sample_samples_needed(tv: float, df: int, alpha: float, power: float = 0.99) -> int:
    """Samples in *each* of two equal arms for a level-``alpha`` test to detect ``tv`` with ``power``."""
    if not 0 < tv <= 1:
        raise ValueError(f"tv must lie in (0, 1], got {tv}")
    return math.ceil(noncentrality(df, alpha, power) / (2.0 * tv * tv))


def two_sample_min_tv(n_a: int, n_b: int, df: int, alpha: float, power: float = 0.99) -> float:
    """The smallest TV between two arms of ``n_a`` and ``n_b`` samples detected with ``power``.

    The inverse of :func:`two_sample_samples_needed` for equal arms; ``1.0`` (nothing guaranteed)
    where an arm is empty or ``df`` is 0.
    """
    if n_a <= 0 or n_b <= 0 or df < 1:
        return 1.0
    return min(1.0, math.sqrt(noncentrality(df, alpha, power) * (n_a + n_b) / (4.0 * n_a * n_b)))
