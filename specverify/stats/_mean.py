"""Is a bounded mean (accepted drafts per call) below or above its exact expectation?

The exact law of each row's count is known, so the Chernoff bound with the exact cumulant
generating function gives valid one-sided p-values with no normal approximation, however far in
the tail the decision level lies: ``P(S <= s) <= exp(-sup_{t<0} [t s - log E e^{tS}])``.

The bound is conservative (about tenfold in p-value at 4-5 standard deviations), so the shift it
detects is larger than a normal approximation suggests; :func:`mean_test` states that shift, at a
given level and power, from the same bound.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, stats

__all__ = ["MeanTest", "mean_test"]


@dataclasses.dataclass(frozen=True)
class MeanTest:
    """Observed against expected mean of a bounded count, with one-sided Chernoff p-values.

    Attributes:
        observed_mean, expected_mean: per row.
        samples: rows.
        pvalue_low, pvalue_high: valid one-sided p-values (a mean too low, too high).
        sd: standard deviation of one row's count under the exact law (pooled over rows).
        min_detectable_drop, min_detectable_rise: the smallest shift of the mean that the
            ``pvalue_low <= alpha`` (``pvalue_high <= alpha``) test detects with ``power``, when
            ``alpha`` was given; ``None`` otherwise.
    """

    observed_mean: float
    expected_mean: float
    samples: int
    pvalue_low: float
    pvalue_high: float
    sd: float = math.nan
    min_detectable_drop: float | None = None
    min_detectable_rise: float | None = None

    @property
    def ratio(self) -> float:
        return self.observed_mean / self.expected_mean if self.expected_mean else math.nan


def mean_test(values: np.ndarray, laws: np.ndarray, *, alpha: float | None = None, power: float = 0.99) -> MeanTest:
    """Test observed counts ``values[i]`` in ``0..J-1`` against their exact laws ``laws[i]``.

    ``laws`` is ``[J]`` (one law for every row) or ``[N, J]`` (a law per row).  With ``alpha``, the
    result also states the smallest drop and rise of the mean each one-sided test at ``alpha``
    detects with ``power``.
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    laws = np.asarray(laws, dtype=np.float64)
    if laws.ndim == 1:
        laws = laws[None, :]
    if laws.shape[0] not in (1, values.size):
        raise ValueError(f"laws must be [J] or [N, J] with N = {values.size}, got {laws.shape}")
    laws = laws / laws.sum(axis=1, keepdims=True)
    n = values.size
    weight = n / laws.shape[0]  # one shared law stands for every row
    support = np.arange(laws.shape[1], dtype=np.float64)
    log_laws = np.log(np.where(laws > 0, laws, 1.0))
    mask = laws > 0
    total = float(values.sum())
    expected = float(weight * (laws @ support).sum())
    variance = float(weight * ((laws @ support**2) - (laws @ support) ** 2).sum())

    def cumulant(t: float) -> float:
        # log-sum-exp by hand: the bounds solve for it thousands of times a test, on a few rows of
        # K+1 cells, where scipy.special.logsumexp's per-call overhead (~0.3 ms) is the whole cost
        terms = np.where(mask, log_laws + t * support, -np.inf)
        top = terms.max(axis=1, keepdims=True)  # finite: every law has mass somewhere
        return float(weight * (top[:, 0] + np.log(np.exp(terms - top).sum(axis=1))).sum())

    def tail(sign: float, s: float) -> float:
        return _chernoff(cumulant, sign, s)

    low = tail(-1.0, total) if total < expected else 1.0
    high = tail(1.0, total) if total > expected else 1.0
    drop = rise = None
    if alpha is not None and n:
        spread = stats.norm.isf(1.0 - power) * math.sqrt(variance)
        drop = float(expected - _critical(tail, -1.0, expected, _extreme(laws, weight, min), alpha) + spread) / n
        rise = float(_critical(tail, 1.0, expected, _extreme(laws, weight, max), alpha) - expected + spread) / n
    return MeanTest(
        total / n if n else math.nan,
        expected / n if n else math.nan,
        n,
        min(1.0, low),
        min(1.0, high),
        math.sqrt(variance / n) if n else math.nan,
        drop,
        rise,
    )


def _chernoff(cumulant: Callable[[float], float], sign: float, s: float) -> float:
    """Chernoff bound of ``P(S <= s)`` (``sign = -1``) or ``P(S >= s)`` (``sign = +1``)."""

    def negative_rate(t: float) -> float:
        return -(sign * t * s - cumulant(sign * t))

    result = optimize.minimize_scalar(negative_rate, bounds=(0.0, 50.0), method="bounded")
    rate = max(0.0, -float(result.fun))
    return math.exp(-rate) if rate < 745 else 0.0


def _extreme(laws: np.ndarray, weight: float, pick: Callable) -> float:
    """Smallest (``min``) or largest (``max``) possible total."""
    cells = np.where(laws > 0, np.arange(laws.shape[1]), np.nan)
    per_row = np.nanmin(cells, axis=1) if pick is min else np.nanmax(cells, axis=1)
    return float(weight * per_row.sum())


def _critical(
    tail: Callable[[float, float], float], sign: float, expected: float, extreme: float, alpha: float
) -> float:
    """The total at which the one-sided bound reaches ``alpha`` (the test's rejection boundary)."""
    if tail(sign, extreme) > alpha:
        return extreme  # even the most extreme total is not significant
    return float(optimize.brentq(lambda s: tail(sign, s) - alpha, expected, extreme, xtol=1e-6))
