"""Is a bounded mean (accepted drafts per call) below or above its exact expectation?

The exact law of each row's count is known, so the Chernoff bound with the exact cumulant
generating function gives valid one-sided p-values with no normal approximation, however far in
the tail the decision level lies: ``P(S <= s) <= exp(-sup_{t<0} [t s - log E e^{tS}])``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import optimize, special

__all__ = ["MeanTest", "mean_test"]


@dataclasses.dataclass(frozen=True)
class MeanTest:
    """Observed against expected total of a bounded count, with one-sided Chernoff p-values."""

    observed_mean: float
    expected_mean: float
    samples: int
    pvalue_low: float
    pvalue_high: float

    @property
    def ratio(self) -> float:
        return self.observed_mean / self.expected_mean if self.expected_mean else math.nan


def mean_test(values: np.ndarray, laws: np.ndarray) -> MeanTest:
    """Test observed counts ``values[i]`` in ``0..J-1`` against their exact laws ``laws[i]``.

    ``laws`` is ``[J]`` (one law for every row) or ``[N, J]`` (a law per row).
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    laws = np.asarray(laws, dtype=np.float64)
    if laws.ndim == 1:
        laws = laws[None, :]
    laws = laws / laws.sum(axis=1, keepdims=True)
    weight = values.size / laws.shape[0]  # one shared law stands for every row
    support = np.arange(laws.shape[1], dtype=np.float64)
    log_laws = np.log(np.where(laws > 0, laws, 1.0))
    mask = laws > 0
    total = values.sum()
    expected = float(weight * (laws @ support).sum())

    def cumulant(t: float) -> float:
        terms = np.where(mask, log_laws + t * support, -np.inf)
        return float(weight * special.logsumexp(terms, axis=1).sum())

    def bound(sign: float) -> float:
        """Chernoff bound of the tail on the ``sign`` side of the expectation."""

        def negative_rate(t: float) -> float:
            return -(sign * t * total - cumulant(sign * t))

        result = optimize.minimize_scalar(negative_rate, bounds=(0.0, 50.0), method="bounded")
        rate = max(0.0, -float(result.fun))
        return math.exp(-rate) if rate < 745 else 0.0

    low = bound(-1.0) if total < expected else 1.0
    high = bound(1.0) if total > expected else 1.0
    n = values.size
    return MeanTest(total / n, expected / n, n, min(1.0, low), min(1.0, high))
