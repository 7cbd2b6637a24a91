"""Power and sample size of chi-square-family tests against a total-variation deviation.

Under a local alternative the G and Pearson statistics follow a noncentral chi-square with
``df`` degrees of freedom and noncentrality ``lambda = n * w**2``, where
``w**2 = sum((q - p)**2 / p)``.  Cauchy-Schwarz gives ``w**2 >= 4 * tv**2`` for every alternative at
total-variation distance ``tv``, so ``n = lambda*(df, alpha, power) / (4 * tv**2)`` samples detect
*any* deviation of that size: a worst-case guarantee, not an average.
"""

from __future__ import annotations

import functools
import math

from scipy import optimize, stats

__all__ = ["min_detectable_tv", "noncentrality", "power_of", "samples_needed"]


@functools.lru_cache(maxsize=4096)
def noncentrality(df: int, alpha: float, power: float = 0.99) -> float:
    """The noncentrality at which a level-``alpha`` chi-square test with ``df`` has ``power``."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must lie in (0, 1), got {alpha}, {power}")
    critical = stats.chi2.isf(alpha, df)

    def shortfall(lam: float) -> float:
        return stats.ncx2.sf(critical, df, lam) - power if lam > 0 else stats.chi2.sf(critical, df) - power

    high = max(1.0, critical)
    while shortfall(high) < 0:
        high *= 2
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-10, rtol=1e-12))


def power_of(n: int, tv: float, df: int, alpha: float) -> float:
    """Worst-case power of a level-``alpha`` test on ``n`` samples against a deviation of ``tv``."""
    critical = stats.chi2.isf(alpha, df)
    return float(stats.ncx2.sf(critical, df, 4.0 * n * tv * tv))


def samples_needed(tv: float, df: int, alpha: float, power: float = 0.99) -> int:
    """Samples for a level-``alpha`` test with ``df`` to detect any deviation of ``tv`` with ``power``."""
    if not 0 < tv <= 1:
        raise ValueError(f"tv must lie in (0, 1], got {tv}")
    return math.ceil(noncentrality(df, alpha, power) / (4.0 * tv * tv))


def min_detectable_tv(n: int, df: int, alpha: float, power: float = 0.99) -> float:
    """The smallest total-variation deviation detected with ``power`` on ``n`` samples.

    The inverse of :func:`samples_needed`; ``1.0`` (nothing guaranteed) when ``n`` or ``df`` is 0.
    """
    if n <= 0 or df < 1:
        return 1.0
    return min(1.0, math.sqrt(noncentrality(df, alpha, power) / (4.0 * n)))
