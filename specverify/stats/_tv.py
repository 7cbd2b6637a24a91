"""How far an observed law is from the exact one: total variation with a confidence interval.

A lossy sampler is measured, not only failed.  The plug-in distance ``TV(P_hat, P0)`` mixes the true
distance ``TV(P, P0)`` with sampling noise ``TV(P_hat, P)``; by the triangle inequality the true
distance lies within that noise of the plug-in value, so an upper quantile of the noise gives an
interval whose coverage does not rest on any approximation of the distance itself.

The noise quantile is taken from two resampling laws, and the larger is kept: the exact law ``P0``
(the noise's own law when the sampler is correct, so the interval covers 0 exactly as often as
stated) and the observed law ``P_hat`` (close to ``P`` when the sampler is far from ``P0``).
Resampling from ``P_hat`` alone under-covers sparse laws, whose unseen cells it cannot redraw.

The point estimate removes the typical noise from the plug-in value in quadrature (signal and noise
add that way when a deviation is spread over many cells); its bias is measured and documented in
docs/statistics.md.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["TVEstimate", "tv_distance", "tv_estimate"]


@dataclasses.dataclass(frozen=True)
class TVEstimate:
    """Total-variation distance between the observed and the exact law.

    Attributes:
        estimate: the plug-in distance with its typical noise removed in quadrature (>= 0).
        low, high: bounds of the ``confidence`` interval.
        confidence: coverage of the interval.
        plug_in: the raw distance between empirical and exact laws.
    """

    estimate: float
    low: float
    high: float
    confidence: float
    plug_in: float


def _laws(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    totals = counts.sum(axis=-1)
    return counts / np.where(totals > 0, totals, 1.0)[..., None], totals


def tv_distance(observed: np.ndarray, probs: np.ndarray) -> float:
    """TV between empirical and exact laws; per group, weighted by the groups' totals."""
    empirical, totals = _laws(np.atleast_2d(np.asarray(observed, dtype=np.float64)))
    probs = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    mass = probs.sum(axis=-1, keepdims=True)
    law = np.divide(probs, mass, out=np.zeros_like(probs), where=mass > 0)
    per_group = 0.5 * np.abs(empirical - law).sum(axis=-1)
    return float((per_group * totals).sum() / max(totals.sum(), 1.0))


def _noise(laws: np.ndarray, totals: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` draws of the weighted TV between counts drawn from ``laws`` and ``laws``."""
    noise = np.zeros(resamples)
    for law, total in zip(laws, totals):  # loops over groups, vectorised over resamples
        if total:
            draws = rng.multinomial(int(total), law, size=resamples) / total
            noise += total * 0.5 * np.abs(draws - law).sum(axis=-1)
    return noise / max(totals.sum(), 1)


def _upper_order_statistic(draws: np.ndarray, confidence: float) -> float:
    """The ``ceil(confidence * (m + 1))``-th smallest of ``m`` draws: a fresh draw falls at or below
    it with probability at least ``confidence`` (a plain empirical quantile falls short by ~1/m)."""
    rank = min(draws.size, math.ceil(confidence * (draws.size + 1)))
    return float(np.partition(draws, rank - 1)[rank - 1])


def tv_estimate(
    observed: np.ndarray,
    probs: np.ndarray,
    *,
    confidence: float = 0.99,
    resamples: int = 1000,
    random_state: np.random.Generator | int | None = None,
) -> TVEstimate:
    """Estimate and interval of the TV distance (``[C]`` or ``[G, C]`` counts)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    rng = np.random.default_rng(random_state)
    observed = np.atleast_2d(np.asarray(observed, dtype=np.int64))
    probs = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    live = observed.sum(axis=1) > 0
    observed, probs = observed[live], probs[live]
    if observed.size == 0:
        return TVEstimate(0.0, 0.0, 1.0, confidence, 0.0)
    null = probs / probs.sum(axis=-1, keepdims=True)
    plug_in = tv_distance(observed, null)
    empirical, totals = _laws(observed.astype(np.float64))
    from_null = _noise(null, totals, resamples, rng)
    from_observed = _noise(empirical, totals, resamples, rng)
    margin = max(_upper_order_statistic(from_null, confidence), _upper_order_statistic(from_observed, confidence))
    low = max(0.0, plug_in - margin)
    high = min(1.0, plug_in + margin)
    typical_noise = float(np.median(from_null))
    estimate = min(high, max(low, float(np.sqrt(max(0.0, plug_in**2 - typical_noise**2)))))
    return TVEstimate(estimate, low, high, confidence, plug_in)
