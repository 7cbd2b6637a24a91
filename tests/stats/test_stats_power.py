"""Power: measured against the noncentral chi-square formula, and every claimed TV is honest.

Deviations are planted with :func:`least_favourable` (half the null mass up by ``2 tv``, half down),
the deviation hardest for chi-square tests, so a formula that holds for it holds for every
deviation of that size.  Rates are compared with binomial bands that a correct implementation leaves
with probability below 1e-6 (see _stats_sim).
"""

from __future__ import annotations

import numpy as np
import pytest
from _stats_sim import draw, rate_interval, rng
from scipy import stats

from specverify.stats import (
    chi_square_distance,
    gof_pvalues,
    gof_test,
    least_favourable,
    min_detectable_tv,
    noncentrality,
    power_of,
    samples_needed,
)

#: Model error allowed between measured power and the noncentral chi-square formula.
FORMULA_ERROR = 0.03


def _formula_power(df: int, alpha: float, lam: float) -> float:
    return float(stats.ncx2.sf(stats.chi2.isf(alpha, df), df, lam))


@pytest.mark.parametrize(
    ("df", "alpha", "expected"),
    # lambda* at power 0.99 (docs/statistics.md; shared/research/statistics.md)
    [(3, 1e-3, 37.9), (15, 1e-3, 55.2), (63, 1e-3, 87.0), (255, 1e-3, 149.1), (15, 1e-6, 80.8), (255, 1e-7, 217.8)],
)
def test_noncentrality_reproduces_the_reference_table(df: int, alpha: float, expected: float) -> None:
    assert noncentrality(df, alpha, 0.99) == pytest.approx(expected, abs=0.06)
    assert _formula_power(df, alpha, noncentrality(df, alpha, 0.99)) == pytest.approx(0.99, abs=1e-8)


@pytest.mark.parametrize(("tv", "df", "alpha"), [(0.01, 15, 1e-6), (0.003, 63, 1e-4), (0.05, 3, 1e-3)])
def test_samples_needed_is_the_smallest_sample_with_the_power(tv: float, df: int, alpha: float) -> None:
    n = samples_needed(tv, df, alpha, 0.99)
    assert power_of(n, tv, df, alpha) >= 0.99 > power_of(n - 1, tv, df, alpha)
    assert min_detectable_tv(n, df, alpha, 0.99) <= tv < min_detectable_tv(n - 1, df, alpha, 0.99)


CASES = [
    # name, law, samples per group, alpha, TV, checks
    ("single, G-test, power 0.5", np.full(16, 1 / 16), samples_needed(0.01, 15, 1e-3, 0.5), 1e-3, 0.01, 10_000),
    ("single, G-test, power 0.9", np.full(16, 1 / 16), samples_needed(0.01, 15, 1e-3, 0.9), 1e-3, 0.01, 10_000),
    ("grouped, G-test", np.full((4, 8), 1 / 8), samples_needed(0.02, 28, 1e-3, 0.7) // 4, 1e-3, 0.02, 10_000),
    ("exact, three cells", np.array([0.5, 0.3, 0.2]), 200, 1e-3, 0.1, 10_000),
    ("Monte Carlo, small counts", np.full(6, 1 / 6), 40, 0.05, 0.25, 1_500),
]


@pytest.mark.parametrize(("name", "law", "samples", "alpha", "tv", "checks"), CASES, ids=[c[0] for c in CASES])
def test_measured_power_matches_the_noncentral_formula(
    name: str, law: np.ndarray, samples: int, alpha: float, tv: float, checks: int
) -> None:
    alternative = least_favourable(law, tv)
    lam = float(np.sum(samples * np.atleast_1d(chi_square_distance(law, alternative))))
    df = int((np.atleast_2d(law) > 0).sum() - np.atleast_2d(law).shape[0])
    observed = draw(rng("power", name), alternative, samples, checks)
    power = float((gof_pvalues(observed, law, alpha=alpha, random_state=rng("power-mc", name)) <= alpha).mean())
    low, high = rate_interval(checks, _formula_power(df, alpha, lam))
    assert low - FORMULA_ERROR <= power <= high + FORMULA_ERROR


def test_sample_size_agrees_with_brute_force_simulation() -> None:
    """TV 0.01, 16 categories, alpha 1e-6, power 0.99: about 2.0e5 samples, and simulation agrees.

    The level 1e-6 is resolved by the chi-square tail of each simulated G statistic (the G-test path),
    so 4,000 simulated checks per sample size suffice.
    """
    law = np.full(16, 1 / 16)
    n = samples_needed(0.01, 15, 1e-6, 0.99)
    assert 1.95e5 <= n <= 2.05e5
    alternative = least_favourable(law, 0.01)
    measured = {}
    for factor in (0.8, 1.0, 1.25):
        observed = draw(rng("brute-force", factor), alternative, int(factor * n), 4_000)
        measured[factor] = float((gof_pvalues(observed, law, alpha=1e-6) <= 1e-6).mean())
    low, high = rate_interval(4_000, 0.99)
    assert low <= measured[1.0] <= high
    # the formula's n is the crossing point: 20% fewer samples fall short, 25% more exceed
    assert measured[0.8] < rate_interval(4_000, power_of(int(0.8 * n), 0.01, 15, 1e-6))[1] < 0.99
    assert measured[1.25] > 0.995


def _detection_rate(name: str, law: np.ndarray, alternative: np.ndarray, samples, alpha: float, checks: int) -> float:
    observed = draw(rng("honest", name), alternative, samples, checks)
    return float((gof_pvalues(observed, law, alpha=alpha, random_state=rng("honest-mc", name)) <= alpha).mean())


def _claim(law: np.ndarray, samples, alpha: float) -> tuple[float, str]:
    result = gof_test(draw(rng("claim"), law, samples, 1)[0], law, alpha=alpha, random_state=0)
    return result.min_detectable_tv(alpha, 0.99), result.method


def _move_into(law: np.ndarray, cells: np.ndarray, tv: float) -> np.ndarray:
    """Move ``tv`` of mass into ``cells`` (spread evenly), out of the others proportionally."""
    q = law.copy()
    others = ~np.isin(np.arange(law.size), cells)
    q[others] *= 1 - tv / law[others].sum()
    q[cells] += tv / cells.size
    return q


#: Ten large cells and six small ones; at 4,000 samples the small cells expect 8, 6 (one pool)
#: and 4, 2, 0.8, 0.4 (the rare cell).
SMALL_CELLS = np.r_[np.full(10, (1 - 5.3e-3) / 10), [2e-3, 1.5e-3, 1e-3, 5e-4, 2e-4, 1e-4]]


def _hidden_in_pool(law: np.ndarray, tv: float) -> np.ndarray:
    """All of one pooled cell's mass moved to its pool-mate (invisible), the rest least-favourably."""
    q = law.copy()
    q[10], q[11] = law[10] + law[11], 0.0
    inside = law[11]
    q[:10] = least_favourable(law[:10] / law[:10].sum(), (tv - inside) / law[:10].sum()) * law[:10].sum()
    return q


HONESTY = [
    # name, law, samples, alpha, alternative(law, tv), expected method
    ("G-test, least favourable", np.full(16, 1 / 16), 50_000, 1e-6, least_favourable, "g-test"),
    ("pooled, least favourable", SMALL_CELLS, 4_000, 1e-6, least_favourable, "g-test"),
    ("pooled, into rare cells", SMALL_CELLS, 4_000, 1e-6, lambda p, tv: _move_into(p, np.arange(12, 16), tv), "g-test"),
    ("pooled, hidden in a pool", SMALL_CELLS, 4_000, 1e-6, _hidden_in_pool, "g-test"),
    (
        "near-deterministic, into rare cells",
        np.r_[1 - 15e-6, np.full(15, 1e-6)],
        100_000,
        1e-6,
        lambda p, tv: _move_into(p, np.arange(1, 16), tv),
        "g-test",
    ),
    ("Monte Carlo, least favourable", np.full(6, 1 / 6), 40, 0.05, least_favourable, "monte-carlo"),
    # a deterministic law (a one-hot target): any deviation lands on a forbidden outcome
    (
        "one possible outcome",
        np.array([1.0, 0.0, 0.0]),
        50_000,
        1e-6,
        lambda p, tv: np.array([1 - tv, tv, 0.0]),
        "g-test",
    ),
    ("exact, least favourable", np.array([0.5, 0.3, 0.2]), 300, 1e-4, least_favourable, "exact"),
]


@pytest.mark.parametrize(("name", "law", "samples", "alpha", "plant", "method"), HONESTY, ids=[h[0] for h in HONESTY])
def test_min_detectable_tv_is_detected_with_its_power(name, law, samples, alpha, plant, method) -> None:
    """A planted deviation of exactly the claimed TV is detected with power >= 0.99."""
    claim, taken = _claim(law, samples, alpha)
    assert taken == method
    alternative = plant(law, claim)
    assert 0.5 * np.abs(alternative - law).sum() == pytest.approx(claim, rel=1e-6)
    checks = 1_000 if method == "monte-carlo" else 2_000
    assert _detection_rate(name, law, alternative, samples, alpha, checks) >= rate_interval(checks, 0.99)[0]


def test_grouped_claim_holds_for_a_deviation_in_one_group() -> None:
    """TV is averaged over the samples: one group of three carries the whole deviation."""
    law = np.full((3, 8), 1 / 8)
    claim, method = _claim(law, 20_000, 1e-6)
    assert method == "g-test"
    alternative = law.copy()
    alternative[0] = least_favourable(law[0], 3 * claim)
    assert _detection_rate("grouped", law, alternative, 20_000, 1e-6, 2_000) >= rate_interval(2_000, 0.99)[0]
