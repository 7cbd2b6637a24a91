"""An anytime-valid test of a known multinomial law (a test martingale).

The likelihood ratio of a Dirichlet-multinomial mixture against the null law ``p0`` is a
nonnegative martingale under the null (Shafer et al. 2011; Lindon & Malek 2022), so by Ville's
inequality rejecting once it reaches ``1 / alpha`` has false-positive rate ``alpha`` however often it
is looked at.  A failing run can stop as soon as the evidence is in.  The prior ``Dirichlet(c * p0)``
with ``c ~ (k - 1) / (4 tv**2)`` is tuned to deviations of size ``tv``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["SequentialTest"]


class SequentialTest:
    """Mixture e-process for one law per group (``probs [C]`` or ``[G, C]``).

    Feed counts with :meth:`update`; :attr:`rejected` turns true, for good, when the e-value reaches
    ``1 / alpha``.  Groups multiply: their product is still a test martingale.
    """

    def __init__(self, probs: np.ndarray, alpha: float, tv: float) -> None:
        probs = np.atleast_2d(np.asarray(probs, dtype=np.float64))
        self.probs = probs / probs.sum(axis=1, keepdims=True)
        self.alpha = alpha
        support = (self.probs > 0).sum(axis=1)
        concentration = np.maximum(support - 1, 1) / (4.0 * tv * tv)
        self._prior = concentration[:, None] * self.probs
        self.counts = np.zeros_like(self.probs, dtype=np.int64)
        self.log_e_value = 0.0
        self.rejected = False

    @property
    def e_value(self) -> float:
        return math.exp(min(self.log_e_value, 700.0))

    @property
    def samples(self) -> int:
        return int(self.counts.sum())

    def update(self, counts: np.ndarray) -> bool:
        """Add counts (same shape as the law); returns :attr:`rejected`."""
        self.counts = self.counts + np.atleast_2d(np.asarray(counts, dtype=np.int64))
        if (self.counts[self.probs == 0] > 0).any():
            self.log_e_value = math.inf
        else:
            self.log_e_value = float(self._log_mixture_ratio())
        self.rejected = self.rejected or self.log_e_value >= math.log(1.0 / self.alpha)
        return self.rejected

    def _log_mixture_ratio(self) -> float:
        support = self.probs > 0
        a = np.where(support, self._prior, 1.0)
        x = np.where(support, self.counts, 0)
        n = x.sum(axis=1)
        total_prior = a.sum(axis=1, where=support)
        log_mixture = (
            special.gammaln(total_prior)
            - special.gammaln(total_prior + n)
            + np.where(support, special.gammaln(a + x) - special.gammaln(a), 0.0).sum(axis=1)
        )
        log_null = special.xlogy(x, np.where(support, self.probs, 1.0)).sum(axis=1)
        return float((log_mixture - log_null).sum())
