"""Planted deviations: the alternative every power statement in this package is computed against.

For a deviation of total variation ``tv`` the chi-square distance ``w**2 = sum((q - p)**2 / p)`` is at
least ``4 * tv**2`` (Cauchy-Schwarz), with equality exactly when ``q / p`` takes the value
``1 + 2 tv`` on half the null mass and ``1 - 2 tv`` on the other half.  That deviation is the
hardest for a chi-square-family test to see, so a test that detects it with some power detects
every deviation of that size with at least that power (to first order).
"""

from __future__ import annotations

import numpy as np

__all__ = ["chi_square_distance", "least_favourable"]


def least_favourable(probs: np.ndarray, tv: float) -> np.ndarray:
    """The law at TV ``tv`` from ``probs`` (``[C]`` or ``[G, C]``) hardest for chi-square tests.

    Mass is moved from a set holding as close as possible to half the null mass (the largest
    cells first) to the rest, proportionally within each set.  ``w**2 = 4 tv**2`` exactly when a
    set holds exactly half.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim == 2:
        return np.stack([least_favourable(row, tv) for row in probs])
    p = probs / probs.sum()
    order = np.argsort(-p, kind="stable")
    cumulative = np.cumsum(p[order])
    # the prefix whose mass is closest to one half (at least one cell, never all of them)
    size = int(np.clip(np.argmin(np.abs(cumulative - 0.5)) + 1, 1, max(1, p.size - 1)))
    up = np.zeros(p.size, dtype=bool)
    up[order[:size]] = True
    a = float(p[up].sum())
    if not 0 < tv <= 1 - a:
        raise ValueError(f"tv must lie in (0, {1 - a:.3g}] for this law, got {tv}")
    q = np.where(up, p * (1 + tv / a), p * (1 - tv / (1 - a)))
    return q / q.sum()


def chi_square_distance(probs: np.ndarray, alternative: np.ndarray) -> float | np.ndarray:
    """``w**2 = sum((q - p)**2 / p)`` over the null's support (one per group for ``[G, C]``)."""
    p = np.asarray(probs, dtype=np.float64)
    q = np.asarray(alternative, dtype=np.float64)
    p = p / p.sum(axis=-1, keepdims=True)
    q = q / q.sum(axis=-1, keepdims=True)
    support = p > 0
    w2 = np.where(support, (q - p) ** 2 / np.where(support, p, 1.0), 0.0).sum(axis=-1)
    return float(w2) if w2.ndim == 0 else w2
