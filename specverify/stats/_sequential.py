"""An anytime-valid test of a known multinomial law (a test martingale).

The likelihood ratio of a Dirichlet-multinomial mixture against the null law ``p0`` is a
nonnegative martingale with mean 1 under the null (Shafer et al. 2011; Lindon and Malek 2022), so by
Ville's inequality the probability that it *ever* reaches ``1 / alpha`` is at most ``alpha``: a run
may look after every batch and stop at the first rejection.  A failing run stops as soon as the
evidence is in.  The prior ``Dirichlet(c * p0)`` with ``c = (k - 1) / (4 tv**2)`` puts its typical
alternative at chi-square distance ``4 tv**2``, the least favourable deviation of size ``tv``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["SequentialTest", "mixture_log_e_value"]


def mixture_log_e_value(counts: np.ndarray, probs: np.ndarray, tv: float) -> np.ndarray:
    """Log e-value of cumulative ``counts [..., G, C]`` against ``probs [G, C]``, vectorised.

    The ratio of the Dirichlet-multinomial probability of the observed *sequence* (the
    multinomial coefficients cancel) to its probability under the null, multiplied over groups.
    An observation where the null puts no mass gives ``inf``.
    """
    probs = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    probs = probs / probs.sum(axis=-1, keepdims=True)
    counts = np.asarray(counts, dtype=np.float64)
    support = probs > 0
    cells = support.sum(axis=-1)
    prior = (np.maximum(cells - 1, 1) / (4.0 * tv * tv))[:, None] * probs
    a = np.where(support, prior, 1.0)
    x = np.where(support, counts, 0.0)
    n = x.sum(axis=-1)
    total_prior = np.where(support, prior, 0.0).sum(axis=-1)
    log_mixture = (
        special.gammaln(total_prior)
        - special.gammaln(total_prior + n)
        + np.where(support, special.gammaln(a + x) - special.gammaln(a), 0.0).sum(axis=-1)
    )
    log_null = special.xlogy(x, np.where(support, probs, 1.0)).sum(axis=-1)
    log_e = (log_mixture - log_null).sum(axis=-1)
    impossible = (np.where(support, 0.0, counts) > 0).any(axis=(-2, -1))
    return np.where(impossible, np.inf, log_e)


class SequentialTest:
    """Mixture e-process for one law per group (``probs [C]`` or ``[G, C]``).

    Feed counts with :meth:`update`; :attr:`rejected` turns true, for good, when the e-value reaches
    ``1 / alpha``.  Groups multiply: their product is still a test martingale.
    """

    def __init__(self, probs: np.ndarray, alpha: float, tv: float) -> None:
        if not (0 < alpha < 1 and 0 < tv <= 1):
            raise ValueError(f"alpha must lie in (0, 1) and tv in (0, 1], got {alpha}, {tv}")
        probs = np.atleast_2d(np.asarray(probs, dtype=np.float64))
        self.probs = probs / probs.sum(axis=1, keepdims=True)
        self.alpha = alpha
        self.tv = tv
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
        self.log_e_value = float(mixture_log_e_value(self.counts, self.probs, self.tv))
        self.rejected = self.rejected or self.log_e_value >= math.log(1.0 / self.alpha)
        return self.rejected
