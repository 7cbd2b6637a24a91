"""gof_test's behaviour case by case: paths, exact values, pooling rules, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from _stats_sim import draw, rng
from scipy import stats

from specverify.stats import gof_pvalues, gof_test
from specverify.stats._gof import MIN_EXPECTED, _bartlett, _pool_cells
from specverify.stats._gof_resampling import g_statistic, monte_carlo_pvalues


def _brute_force_exact(observed: list[int], probs: np.ndarray) -> float:
    """Null mass of every table whose G is at least the observed one, by plain enumeration."""
    n = sum(observed)
    expected = n * probs
    observed_g = float(g_statistic(np.array(observed), expected))
    total = 0.0
    for table in itertools.product(range(n + 1), repeat=len(probs) - 1):
        last = n - sum(table)
        if last < 0:
            continue
        full = np.array([*table, last])
        if float(g_statistic(full, expected)) >= observed_g - 1e-9 * max(1.0, observed_g):
            total += stats.multinomial.pmf(full, n, probs)
    return total


@pytest.mark.parametrize("observed", [[7, 2, 1], [3, 3, 4], [0, 0, 10], [1, 8, 1]])
def test_exact_test_matches_enumeration(observed: list[int]) -> None:
    probs = np.array([0.5, 0.3, 0.2])
    result = gof_test(np.array(observed), probs)
    assert result.method == "exact"
    assert result.pvalue == pytest.approx(_brute_force_exact(observed, probs), rel=1e-9, abs=1e-15)


def test_exact_two_cells_agrees_with_binomial_likelihood_ratio_ordering() -> None:
    # symmetric law: G ordering is |x - n/2| ordering, so the p-value is the two-sided binomial one
    result = gof_test(np.array([62, 38]), np.array([0.5, 0.5]))
    assert result.method == "exact"
    assert result.pvalue == pytest.approx(stats.binomtest(62, 100, 0.5).pvalue, rel=1e-9)


def test_observation_where_the_law_has_no_mass_is_an_exact_failure() -> None:
    result = gof_test(np.array([50, 49, 1]), np.array([0.5, 0.5, 0.0]))
    assert (result.method, result.pvalue, result.impossible) == ("impossible", 0.0, 1)
    assert result.min_detectable_tv(1e-6) == 0.0


def test_cells_of_zero_mass_and_groups_without_samples_are_ignored() -> None:
    probs = np.array([[0.25, 0.25, 0.5, 0.0], [0.1, 0.2, 0.3, 0.4]])
    observed = np.array([[260, 240, 500, 0], [0, 0, 0, 0]])
    alone = gof_test(observed[0, :3], probs[0, :3])
    grouped = gof_test(observed, probs)
    assert grouped.pvalue == pytest.approx(alone.pvalue)
    assert grouped.samples == alone.samples == 1000


def test_law_is_normalised_per_group() -> None:
    observed = np.array([[120, 80, 300, 500], [30, 30, 40, 900]])
    probs = np.array([[1.0, 1.0, 3.0, 5.0], [0.03, 0.03, 0.04, 0.9]])
    assert gof_test(observed, probs).pvalue == pytest.approx(gof_test(observed, 7.0 * probs).pvalue)


def test_large_counts_take_the_g_test_with_its_bartlett_factor() -> None:
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    observed = np.array([4_100, 2_950, 1_990, 960])
    result = gof_test(observed, probs)
    g = float(g_statistic(observed, 10_000 * probs))
    q = 1 + ((1 / probs).sum() - 1) / (6 * 10_000 * 3)
    assert result.method == "g-test"
    assert result.statistic == pytest.approx(g / q)
    assert result.pvalue == pytest.approx(stats.chi2.sf(g / q, 3))
    assert result.pearson_pvalue == pytest.approx(stats.chisquare(observed, 10_000 * probs).pvalue)


def test_bartlett_factor_is_williams_for_a_uniform_law_and_larger_otherwise() -> None:
    k, n = 16, 500
    assert _bartlett(np.full(k, 1 / k), np.array(n)) == pytest.approx(1 + (k + 1) / (6 * n))
    skewed = 0.7 ** np.arange(k)
    assert _bartlett(skewed / skewed.sum(), np.array(n)) > 1 + (k + 1) / (6 * n)


def test_pooling_depends_on_expected_counts_only() -> None:
    expected = np.array([40.0, 30.0, 8.0, 4.0, 3.0, 0.5, 0.2, 0.1])
    pooling = _pool_cells(expected)
    pools = {label: expected[pooling.labels == label].sum() for label in np.unique(pooling.labels)}
    rare = pools.pop(pooling.rare)
    assert all(mass >= MIN_EXPECTED for mass in pools.values())
    assert rare < MIN_EXPECTED
    # the rarest cells make the rare pool; the large cells stay alone
    assert set(np.flatnonzero(pooling.labels == pooling.rare)) == {4, 5, 6, 7}
    assert list(pooling.pooled) == [False, False, True, True, True, True, True, True]


def test_observed_counts_never_change_the_pooling() -> None:
    probs = np.array([0.45, 0.45, 0.05, 0.03, 0.015, 0.005])
    a = gof_test(np.array([90, 90, 12, 6, 2, 0]), probs)
    b = gof_test(np.array([90, 90, 0, 0, 0, 20]), probs)
    assert (a.df, a.cells, a.merged_mass, a.rare_expected) == (b.df, b.cells, b.merged_mass, b.rare_expected)


def test_mass_moved_into_rare_outcomes_is_caught_by_the_rare_tail() -> None:
    probs = np.r_[np.full(4, 0.25 - 1e-6), np.full(4, 1e-6)]
    observed = np.array([24_990, 25_002, 24_995, 24_993, 5, 4, 6, 5])  # expected 0.1 each
    result = gof_test(observed, probs)
    assert result.rare_expected == pytest.approx(0.4, rel=1e-3)
    assert result.rare_observed == 20
    assert result.pvalue < 1e-12


def test_near_deterministic_law_is_tested_by_its_rare_outcomes() -> None:
    probs = np.r_[1.0, np.full(15, 1e-7)]
    clean = gof_test(np.r_[100_000, np.zeros(15, dtype=int)], probs)
    assert clean.df == 0 and clean.pvalue == 1.0
    leaky = gof_test(np.r_[99_990, np.full(10, 1), np.zeros(5, dtype=int)], probs)
    assert leaky.pvalue < 1e-12


def test_small_counts_with_a_coarse_level_take_monte_carlo_and_are_deterministic() -> None:
    probs = np.full(12, 1 / 12)
    observed = np.array([4, 1, 2, 0, 3, 2, 1, 5, 0, 2, 3, 1])
    first = gof_test(observed, probs, alpha=1e-2, random_state=7)
    again = gof_test(observed, probs, alpha=1e-2, random_state=7)
    assert first.method == "monte-carlo" and first == again
    assert gof_test(observed, probs).method == "g-test"  # no level given: no Monte Carlo


def test_monte_carlo_stopping_never_changes_a_decision_at_its_level() -> None:
    """Besag-Clifford stopping after 50 exceedances against the full 50 / alpha draws."""
    alpha = 1e-2
    probs = np.full((1, 10), 0.1)
    generator = rng("monte-carlo", "stopping")
    observed = draw(generator, probs, 30, 200)
    # add checks near the level: push mass into one cell
    observed[:100, 0, 0] += 4
    observed[:100, 0, 1:5] -= 1
    observed = np.maximum(observed, 0)
    for counts in observed[:60]:
        totals = counts.sum(axis=1)
        stopped, _, draws = monte_carlo_pvalues(
            counts[None], probs, totals, max_draws=5_000, rng=np.random.default_rng(1)
        )
        full, _, _ = monte_carlo_pvalues(
            counts[None], probs, totals, max_draws=5_000, rng=np.random.default_rng(1), stop_after=10**9
        )
        assert (stopped[0] <= alpha) == (full[0] <= alpha)
        if draws[0] < 5_000:
            assert stopped[0] > alpha


def test_batch_pvalues_equal_single_tests_outside_monte_carlo() -> None:
    probs = np.array([[0.5, 0.3, 0.15, 0.05], [0.25, 0.25, 0.25, 0.25]])
    observed = draw(rng("batch"), probs, [400, 300], 25)
    single = [gof_test(o, probs).pvalue for o in observed]
    np.testing.assert_allclose(gof_pvalues(observed, probs), single, rtol=1e-12)


def test_batch_needs_one_total_per_group() -> None:
    with pytest.raises(ValueError, match="same total"):
        gof_pvalues(np.array([[5, 5], [6, 5]]), np.array([0.5, 0.5]))


@pytest.mark.parametrize(
    ("observed", "probs", "message"),
    [
        (np.array([1, 2]), np.array([0.5, 0.25, 0.25]), "shape"),
        (np.array([1, -2, 3]), np.array([0.5, 0.25, 0.25]), ">= 0"),
        (np.array([1.5, 2, 3]), np.array([0.5, 0.25, 0.25]), "whole numbers"),
        (np.array([1, 2, 3]), np.array([0.5, np.nan, 0.25]), "finite"),
        (np.array([[1, 2], [3, 4]]), np.array([[0.5, 0.5], [0.0, 0.0]]), "zero mass"),
    ],
)
def test_invalid_input_is_refused(observed: np.ndarray, probs: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gof_test(observed, probs)


def test_unknown_method_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        gof_test(np.array([1, 2]), np.array([0.5, 0.5]), method="anderson")
