"""Calibration of the full-domain identity test: its level and its power, measured.

Vectorised simulations at a small domain (50 cells); the same code runs at any size.  Counts are
Poisson, as the harness's Poisson-sized batches make them.
"""

from __future__ import annotations

import numpy as np

from specverify.replay import derive_seed
from specverify.stats import identity_min_tv, identity_plan, identity_test
from specverify.stats._identity import BATCH_LEVEL, _threshold

CELLS, TV, ALPHA, POWER, REPS = 50, 0.2, 0.01, 0.99, 2_000


def _law(rng: np.random.Generator) -> np.ndarray:
    weights = rng.uniform(0.2, 1.8, CELLS)
    return weights / weights.sum()


def _spread(p: np.ndarray, tv: float, rng: np.random.Generator) -> np.ndarray:
    """Every cell moved by a relative factor: up on cells of mass ``a``, down on the rest (mass
    ``b``), by ``tv / a`` and ``tv / b``: still a law, TV exactly ``tv``."""
    up = np.zeros(CELLS, dtype=bool)
    up[rng.permutation(CELLS)[: CELLS // 2]] = True
    a, b = p[up].sum(), p[~up].sum()
    return np.where(up, p * (1 + tv / a), p * (1 - tv / b))


def _pvalues(
    law: np.ndarray, p: np.ndarray, batches: int, size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    counts = rng.poisson(size * law, size=(REPS, batches, CELLS))
    expected = size * p
    z = (((counts - expected) ** 2 - counts) / expected).sum(axis=-1)
    rejecting = (z >= _threshold(CELLS)).sum(axis=-1)
    pvalues = np.array([identity_test(counts[i], p, eps=TV, mean_size=size).pvalue for i in range(0, REPS, 100)])
    return rejecting, pvalues


def test_level_is_held_at_every_batch_and_overall():
    rng = np.random.default_rng(derive_seed(0, "identity-level"))
    p = _law(rng)
    batches, size = identity_plan(CELLS, TV, ALPHA, POWER)
    rejecting, pvalues = _pvalues(p, p, batches, size, rng)
    assert (rejecting / batches).mean() <= BATCH_LEVEL  # Cantelli's bound per batch
    from scipy import stats

    critical = int(np.nonzero(stats.binom.sf(np.arange(batches + 1) - 1, batches, BATCH_LEVEL) <= ALPHA)[0][0])
    false_alarms = int((rejecting >= critical).sum())
    assert false_alarms <= stats.binom.ppf(1 - 1e-6, REPS, ALPHA)  # at most alpha, up to simulation noise
    assert (pvalues > ALPHA).all()


def test_power_at_the_planned_deviation_is_at_least_the_stated_power():
    rng = np.random.default_rng(derive_seed(0, "identity-power"))
    p = _law(rng)
    batches, size = identity_plan(CELLS, TV, ALPHA, POWER)
    assert identity_min_tv(size, batches, CELLS, ALPHA, POWER) <= TV * 1.001
    q = _spread(p, TV, rng)
    assert abs(0.5 * np.abs(q - p).sum() - TV) < 1e-9
    rejecting, _ = _pvalues(q, p, batches, size, rng)
    from scipy import stats

    critical = int(np.nonzero(stats.binom.sf(np.arange(batches + 1) - 1, batches, BATCH_LEVEL) <= ALPHA)[0][0])
    detected = (rejecting >= critical).mean()
    assert detected >= POWER - 0.01  # the stated power is a lower bound (Chebyshev)


def test_samples_grow_like_the_square_root_of_the_domain():
    small = np.prod(identity_plan(1_000, 0.05, 1e-6))
    large = np.prod(identity_plan(100_000, 0.05, 1e-6))
    assert 5 < large / small < 20  # sqrt(100) = 10; a chi-square test would need 100x


def test_an_observation_of_null_probability_zero_is_an_exact_failure():
    p = np.array([0.5, 0.5, 0.0])
    result = identity_test(np.array([[10, 9, 1]]), p, eps=0.1)
    assert result.pvalue == 0.0 and result.method == "impossible" and result.impossible == 1
