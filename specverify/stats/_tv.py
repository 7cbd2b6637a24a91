"""How far an observed law is from the exact one: total variation with a confidence interval.

A lossy sampler is measured, not only failed.  The plug-in distance ``TV(P_hat, P0)`` mixes the true
distance with sampling noise ``TV(P_hat, P)``; by the triangle inequality the true distance lies
within that noise of the plug-in value.  The noise is estimated by resampling counts from the
observed law (``TV(P*, P_hat)``), which, unlike a bootstrap of the distance itself, stays honest at a
distance of zero.
"""

from __future__ import annotations

import dataclasses

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


def tv_estimate(
    observed: np.ndarray,
    probs: np.ndarray,
    *,
    confidence: float = 0.99,
    resamples: int = 1000,
    random_state: np.random.Generator | int | None = None,
) -> TVEstimate:
    """Estimate and interval of the TV distance (``[C]`` or ``[G, C]`` counts)."""
    rng = np.random.default_rng(random_state)
    observed = np.atleast_2d(np.asarray(observed, dtype=np.int64))
    plug_in = tv_distance(observed, probs)
    empirical, totals = _laws(observed.astype(np.float64))
    noise = np.zeros(resamples)
    for group, total in enumerate(totals):  # loops over groups, vectorised over resamples
        if total:
            draws = rng.multinomial(total, empirical[group], size=resamples) / total
            noise += total * 0.5 * np.abs(draws - empirical[group]).sum(axis=-1)
    noise /= max(totals.sum(), 1)
    margin = float(np.quantile(noise, confidence))
    low = max(0.0, plug_in - margin)
    high = min(1.0, plug_in + margin)
    # Signal and noise add roughly in quadrature when the deviation is spread over many cells.
    typical_noise = float(np.median(noise))
    estimate = min(high, max(low, float(np.sqrt(max(0.0, plug_in**2 - typical_noise**2)))))
    return TVEstimate(estimate, low, high, confidence, plug_in)
