"""A Monte Carlo p-value the evidence already decides (stats/_gof_resampling.py): set without
drawing only where the null all but never reaches the statistic, and then the value full draws give."""

from __future__ import annotations

import numpy as np

from specverify.stats._gof_resampling import _log_tail_bound, g_statistic, monte_carlo_pvalues


def _groups(totals: np.ndarray, probs: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
    return [(int(n), p, n * p) for n, p in zip(totals, probs)]


def test_a_decisive_deviation_gets_the_full_draws_p_value_without_drawing():
    probs = np.full((2, 4), 0.25)
    observed = np.array([[[1400, 900, 800, 900], [700, 1300, 1000, 1000]]])
    totals = observed[0].sum(axis=1)
    fast, statistic, draws = monte_carlo_pvalues(
        observed, probs, totals, max_draws=20_000, rng=np.random.default_rng(0)
    )
    assert draws[0] == 0 and fast[0] == 1.0 / 20_001
    # what drawing would have given: no simulated statistic reaches it
    rng = np.random.default_rng(1)
    simulated = sum(g_statistic(rng.multinomial(int(n), p, size=20_000), n * p[None, :]) for n, p in zip(totals, probs))
    assert (simulated >= statistic[0]).sum() == 0


def test_null_counts_never_stop_before_drawing():
    rng = np.random.default_rng(2)
    probs = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    totals = np.array([500, 2_000])
    observed = np.stack([rng.multinomial(n, p, size=2_000) for n, p in zip(totals, probs)], axis=1)
    _, statistic, draws = monte_carlo_pvalues(observed, probs, totals, max_draws=50_000, rng=rng)
    assert (draws > 0).all()
    # the bound is a bound: far above the chance of any null statistic drawn here
    assert (_log_tail_bound(statistic, _groups(totals, probs)) > np.log(1e-9 / 50_000)).all()
