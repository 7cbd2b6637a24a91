"""Shared tools of the statistics tests: seeded draws and tolerances that cannot flake.

Every check here is deterministic (fixed seeds); its tolerance is still chosen so that, were the
seed drawn at random, a correct implementation would fail it with probability below
``FALSE_FAILURE`` (per assertion).  Each bound says which inequality gives it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from specverify._seeds import derive_seed
from specverify.stats import gof_pvalues

#: Probability that a single assertion fails on a correct implementation.
FALSE_FAILURE = 1e-6


def rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed("tests.stats", *parts))


def draw(generator: np.random.Generator, probs: np.ndarray, totals: int | np.ndarray, size: int) -> np.ndarray:
    """``size`` draws of counts ``[size, G, C]`` (or ``[size, C]`` for a 1-D law)."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim == 1:
        return generator.multinomial(int(totals), probs / probs.sum(), size=size)
    totals = np.broadcast_to(np.asarray(totals), probs.shape[:1])
    return np.stack([generator.multinomial(int(n), p / p.sum(), size=size) for n, p in zip(totals, probs)], axis=1)


def pvalues(observed: np.ndarray, probs: np.ndarray, seed: str, **kwargs: object) -> np.ndarray:
    """gof_test's p-value for each draw (through gof_pvalues), Monte Carlo draws seeded by ``seed``."""
    return gof_pvalues(observed, probs, random_state=derive_seed("tests.stats", seed), **kwargs)


def dkw_one_sided(n: int) -> float:
    """``d`` with ``P(sup(F_n - F) > d) <= FALSE_FAILURE`` (Massart's DKW inequality, one side)."""
    return math.sqrt(math.log(1.0 / FALSE_FAILURE) / (2.0 * n))


def dkw_two_sided(n: int) -> float:
    """``d`` with ``P(sup|F_n - F| > d) <= FALSE_FAILURE`` (Massart's DKW inequality)."""
    return math.sqrt(math.log(2.0 / FALSE_FAILURE) / (2.0 * n))


def excess_over_uniform(p: np.ndarray) -> float:
    """``sup_u (F_n(u) - u)``: how far the p-values are from being valid (super-uniform)."""
    ordered = np.sort(p)
    return float(np.max(np.arange(1, p.size + 1) / p.size - ordered))


def distance_from_uniform(p: np.ndarray) -> float:
    """Two-sided Kolmogorov-Smirnov distance of the p-values from U(0, 1)."""
    return float(stats.kstest(p, "uniform").statistic)


def most_rejections(n: int, rate: float) -> int:
    """Largest count of rejections a level-``rate`` test gives in ``n`` trials but with prob. FALSE_FAILURE."""
    return int(stats.binom.isf(FALSE_FAILURE, n, min(1.0, rate)))


def fewest_rejections(n: int, rate: float) -> int:
    """Smallest count, as above, from below."""
    return int(stats.binom.ppf(FALSE_FAILURE, n, rate))


def rate_interval(n: int, rate: float) -> tuple[float, float]:
    """Rates between which ``n`` trials of true rate ``rate`` fall but with probability 2 FALSE_FAILURE."""
    return stats.binom.ppf(FALSE_FAILURE, n, rate) / n, stats.binom.isf(FALSE_FAILURE, n, rate) / n
