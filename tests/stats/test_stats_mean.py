"""The mean test of accepted drafts: valid against the exact law of the total, honest in power."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from specverify.stats import mean_test

LAW = np.array([0.3, 0.25, 0.2, 0.15, 0.1])  # accepted drafts 0..4
ROWS = 2_000


def _exact_cdf(law: np.ndarray, rows: int) -> np.ndarray:
    """``P(S <= s)`` for the total of ``rows`` iid counts, by FFT (exact to ~1e-13 at this size)."""
    size = rows * (law.size - 1) + 1
    pmf = np.fft.irfft(np.fft.rfft(law, size) ** rows, size)
    return np.cumsum(np.clip(pmf, 0.0, None))


def _values_with_total(total: int, rows: int, top: int) -> np.ndarray:
    values = np.zeros(rows)
    values[: total // top] = top
    values[total // top] = total % top
    return values


def _spread() -> tuple[float, float]:
    support = np.arange(LAW.size)
    mean = float(LAW @ support)
    return ROWS * mean, float(np.sqrt(ROWS * (LAW @ support**2 - mean**2)))


@pytest.mark.parametrize("z", [1.0, 2.0, 3.0, 4.0, 5.0])
def test_pvalues_are_never_below_the_exact_tail(z: float) -> None:
    mean, sd = _spread()
    cdf = _exact_cdf(LAW, ROWS)
    low_total = int(mean - z * sd)
    high_total = int(np.ceil(mean + z * sd))
    result_low = mean_test(_values_with_total(low_total, ROWS, 4), LAW)
    result_high = mean_test(_values_with_total(high_total, ROWS, 4), LAW)
    assert result_low.pvalue_low >= cdf[low_total] * (1 - 1e-9)
    assert result_high.pvalue_high >= (1 - cdf[high_total - 1]) * (1 - 1e-9)
    assert result_low.pvalue_high == 1.0 and result_high.pvalue_low == 1.0


def test_one_law_for_all_rows_equals_a_law_per_row() -> None:
    values = np.random.default_rng(3).choice(LAW.size, size=300, p=LAW)
    shared = mean_test(values, LAW)
    per_row = mean_test(values, np.tile(LAW, (300, 1)))
    assert shared.pvalue_low == pytest.approx(per_row.pvalue_low, rel=1e-6)
    assert shared.pvalue_high == pytest.approx(per_row.pvalue_high, rel=1e-6)
    assert shared.expected_mean == pytest.approx(per_row.expected_mean)


def test_min_detectable_drop_is_detected_with_its_power() -> None:
    """A sampler whose mean is lower by the stated drop is failed with probability >= 0.99 (exact)."""
    alpha = 1e-6
    mean, _ = _spread()
    claim = mean_test(_values_with_total(int(mean), ROWS, 4), LAW, alpha=alpha, power=0.99)
    assert claim.min_detectable_drop is not None
    # the rejection boundary: the largest total the test rejects at alpha
    boundary = int(
        optimize.brentq(lambda s: mean_test(_values_with_total(int(s), ROWS, 4), LAW).pvalue_low - alpha, 0, mean)
    )
    while mean_test(_values_with_total(boundary, ROWS, 4), LAW).pvalue_low > alpha:
        boundary -= 1
    # the exponentially tilted law whose mean is lower by exactly the claimed drop
    support = np.arange(LAW.size)

    def tilted(theta: float) -> np.ndarray:
        w = LAW * np.exp(theta * support)
        return w / w.sum()

    target = mean / ROWS - claim.min_detectable_drop
    theta = optimize.brentq(lambda t: tilted(t) @ support - target, -5.0, 0.0)
    assert _exact_cdf(tilted(theta), ROWS)[boundary] >= 0.99
    # and the normal approximation the claim replaces would have promised too much
    normal = (4.753424 + 2.326348) * claim.sd / np.sqrt(ROWS)
    assert claim.min_detectable_drop > normal


def test_rejects_a_sampler_that_drops_the_bonus_acceptance() -> None:
    lazy = np.array([0.4, 0.3, 0.2, 0.1, 0.0])  # never accepts all four drafts
    values = np.random.default_rng(5).choice(LAW.size, size=5_000, p=lazy)
    result = mean_test(values, LAW)
    assert result.pvalue_low < 1e-12 and result.ratio < 0.8
