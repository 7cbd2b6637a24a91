"""Independence across calls and rows: calibrated under the null, and a sampler that repeats
itself or correlates rows fails (power on planted dependence matches the formula)."""

from __future__ import annotations

import numpy as np
import pytest
from _stats_sim import (
    distance_from_uniform,
    dkw_one_sided,
    dkw_two_sided,
    excess_over_uniform,
    fewest_rejections,
    most_rejections,
    rate_interval,
    rng,
)
from scipy import stats

from specverify.stats import homogeneity_test, independence_test, least_favourable

#: A law of 12 outcomes, a few of them rare (as a step's outcomes are).
LAW = np.r_[np.full(8, 0.12), [0.025, 0.0125, 0.0075, 0.005]]
LAW = LAW / LAW.sum()
FORMULA_ERROR = 0.03


def _tables(name: str, joint: np.ndarray, pairs: int, checks: int) -> np.ndarray:
    """``checks`` contingency tables of ``pairs`` draws from a joint law ``[R, C]``."""
    flat = rng("tables", name).multinomial(pairs, joint.reshape(-1), size=checks)
    return flat.reshape(checks, *joint.shape)


def _pvalues(tables: np.ndarray) -> np.ndarray:
    return np.array([homogeneity_test(t).pvalue for t in tables])


def _g_noncentrality(joint: np.ndarray, pairs: int) -> float:
    """The G-test's noncentrality, ``2 n KL(joint || product of margins)`` (2n x mutual information).

    It equals ``n w**2`` to second order and is at least ``4 n TV**2`` (Pinsker), so the worst-case
    claims hold for G; for a lopsided dependence such as repetition it is a little below ``n w**2``.
    """
    product = np.outer(joint.sum(axis=1), joint.sum(axis=0))
    return 2.0 * pairs * float((joint * np.log(np.where(joint > 0, joint / product, 1.0))).sum())


def _repeating(law: np.ndarray, rho: float) -> np.ndarray:
    """Joint law of (a, b): b repeats a with probability ``rho``, else is drawn afresh."""
    return (1 - rho) * np.outer(law, law) + rho * np.diag(law)


@pytest.mark.parametrize(
    ("name", "joint", "pairs", "checks"),
    [
        ("independent pairs, rare outcomes", np.outer(LAW, LAW), 3_000, 10_000),
        ("two samples of one law", np.stack([LAW, LAW]) / 2, 4_000, 5_000),
    ],
)
def test_null_pvalues_are_uniform(name: str, joint: np.ndarray, pairs: int, checks: int) -> None:
    p = _pvalues(_tables(name, joint, pairs, checks))
    assert excess_over_uniform(p) <= dkw_one_sided(checks) + 0.01
    assert distance_from_uniform(p) <= dkw_two_sided(checks) + 0.01
    for level in (1e-2, 1e-3):
        assert fewest_rejections(checks, 0.75 * level) <= (p <= level).sum() <= most_rejections(checks, 1.25 * level)


def test_pairs_and_their_table_give_one_test() -> None:
    generator = rng("pairs")
    a = generator.choice(LAW.size, size=5_000, p=LAW)
    b = generator.choice(LAW.size, size=5_000, p=LAW)
    table = np.zeros((LAW.size, LAW.size))
    np.add.at(table, (a, b), 1)
    assert independence_test(a, b) == homogeneity_test(table)


def test_power_on_planted_repetition_matches_the_formula() -> None:
    """b repeats a with probability rho (n w^2 = n rho^2 (k - 1)); df = (k - 1)^2 (no pooling)."""
    k, pairs, rho = 6, 2_000, 0.05
    law = np.full(k, 1 / k)
    lam, df = _g_noncentrality(_repeating(law, rho), pairs), (k - 1) ** 2
    assert lam == pytest.approx(pairs * rho**2 * (k - 1), rel=0.1)
    formula = stats.ncx2.sf(stats.chi2.isf(1e-3, df), df, lam)
    power = float((_pvalues(_tables("repeat", _repeating(law, rho), pairs, 4_000)) <= 1e-3).mean())
    low, high = rate_interval(4_000, formula)
    assert 0.2 < formula < 0.8
    assert low - FORMULA_ERROR <= power <= high + FORMULA_ERROR


def test_min_detectable_tv_of_independence_is_honest() -> None:
    """A repetition whose TV (joint against product) equals the claim is caught with power 0.99."""
    pairs, alpha = 20_000, 1e-6
    claim = homogeneity_test(_tables("claim", np.outer(LAW, LAW), pairs, 1)[0]).min_detectable_tv(alpha)
    rho = claim / (1 - (LAW**2).sum())  # TV(joint, product) = rho * (1 - sum p^2)
    power = float((_pvalues(_tables("honest", _repeating(LAW, rho), pairs, 2_000)) <= alpha).mean())
    assert power >= rate_interval(2_000, 0.99)[0]


def test_sampler_repeating_its_previous_call_fails() -> None:
    generator = rng("repeat-call")
    call = generator.choice(LAW.size, size=4_096, p=LAW)
    assert independence_test(call, call).pvalue < 1e-300
    # only one row in twenty repeated: still far beyond any budget
    fresh = generator.choice(LAW.size, size=100_000, p=LAW)
    previous = generator.choice(LAW.size, size=100_000, p=LAW)
    repeated = np.where(generator.random(100_000) < 0.05, previous, fresh)
    assert independence_test(previous, repeated).pvalue < 1e-9


def test_rows_sharing_their_uniforms_fail() -> None:
    """Adjacent rows driven by one uniform, inverted through different laws: dependent."""
    generator = rng("shared-uniform")
    u = generator.random(50_000)
    other = least_favourable(LAW, 0.1)
    a = np.searchsorted(np.cumsum(LAW), u)
    b = np.searchsorted(np.cumsum(other), u)
    assert independence_test(np.minimum(a, 11), np.minimum(b, 11)).pvalue < 1e-300


def test_homogeneity_power_on_neighbour_dependent_law() -> None:
    """A row's law that shifts by TV 0.02 with its neighbour: detected as the formula says."""
    rows, alpha = 20_000, 1e-4
    shifted = least_favourable(LAW, 0.02)
    joint = np.stack([LAW, shifted]) / 2
    lam = _g_noncentrality(joint, 2 * rows)
    formula = stats.ncx2.sf(stats.chi2.isf(alpha, LAW.size - 1), LAW.size - 1, lam)
    generator = rng("neighbours")
    tables = np.stack(
        [generator.multinomial(rows, LAW, size=3_000), generator.multinomial(rows, shifted, size=3_000)], axis=1
    )
    power = float((_pvalues(tables) <= alpha).mean())
    low, high = rate_interval(3_000, formula)
    assert low - FORMULA_ERROR <= power <= high + FORMULA_ERROR
