"""Two samples, one law: calibrated under the null (both arms from one law, in one group or many), and
a planted difference at the stated smallest TV is caught at the stated power, whichever arm moved."""

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

from specverify.stats import (
    least_favourable,
    samples_needed,
    two_sample_min_tv,
    two_sample_samples_needed,
    two_sample_test,
)

#: A law of 10 outcomes, a few of them rare (as a generation's next token is).
LAW = np.r_[np.full(6, 0.15), [0.06, 0.025, 0.01, 0.005]]
LAW = LAW / LAW.sum()
#: Three groups (prefixes) with laws of their own.
GROUPS = np.stack([LAW, LAW[::-1], np.roll(LAW, 3)])


def _arms(name: str, law_a: np.ndarray, law_b: np.ndarray, n: int, checks: int) -> tuple[np.ndarray, np.ndarray]:
    """``checks`` pairs of count vectors (``[checks, C]`` or ``[checks, G, C]``), ``n`` draws an arm (a group)."""
    generator = rng("two-sample", name)

    def counts(law: np.ndarray) -> np.ndarray:
        if law.ndim == 1:
            return generator.multinomial(n, law, size=checks)
        return np.stack([generator.multinomial(n, row, size=checks) for row in law], axis=1)

    return counts(law_a), counts(law_b)


def _pvalues(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([two_sample_test(x, y).pvalue for x, y in zip(a, b)])


@pytest.mark.parametrize(
    ("name", "law", "n", "checks"), [("one group", LAW, 2_000, 4_000), ("groups", GROUPS, 800, 3_000)]
)
def test_null_pvalues_are_uniform(name: str, law: np.ndarray, n: int, checks: int) -> None:
    p = _pvalues(*_arms(name, law, law, n, checks))
    assert excess_over_uniform(p) <= dkw_one_sided(checks) + 0.01
    assert distance_from_uniform(p) <= dkw_two_sided(checks) + 0.01
    for level in (1e-2, 1e-3):
        assert fewest_rejections(checks, 0.75 * level) <= (p <= level).sum() <= most_rejections(checks, 1.25 * level)


@pytest.mark.parametrize("moved", ["speculation on", "speculation off"])
def test_a_difference_at_the_stated_tv_is_caught_at_the_stated_power(moved: str) -> None:
    """Arms of the size the plan asks for TV 0.05 at power 0.9: a least-favourable difference of 0.05 is
    caught in at least 0.9 of the runs (binomial bound), whichever arm moved."""
    tv, alpha, power, checks = 0.05, 1e-3, 0.9, 400
    n = two_sample_samples_needed(tv, LAW.size - 1, alpha, power)
    shifted = least_favourable(LAW, tv)
    a, b = _arms(moved, LAW, shifted, n, checks) if moved == "speculation on" else _arms(moved, shifted, LAW, n, checks)
    detected = float((_pvalues(a, b) <= alpha).mean())
    assert detected >= rate_interval(checks, power)[0]


def test_the_stated_tv_is_what_the_arms_detect() -> None:
    a, b = _arms("claim", LAW, LAW, 5_000, 1)
    result = two_sample_test(a[0], b[0])
    assert result.samples == (5_000, 5_000)
    assert result.df == LAW.size - 1 and result.groups == 1 and result.pooled_mass == 0.0
    assert result.min_detectable_tv(1e-3, 0.9) == pytest.approx(
        two_sample_min_tv(5_000, 5_000, LAW.size - 1, 1e-3, 0.9)
    )


def test_two_arms_cost_twice_the_one_sample_size_each() -> None:
    for df, tv in [(3, 0.1), (9, 0.02), (63, 0.005)]:
        one, each = samples_needed(tv, df, 1e-4, 0.99), two_sample_samples_needed(tv, df, 1e-4, 0.99)
        assert each == pytest.approx(2 * one, abs=2)
        assert two_sample_min_tv(each, each, df, 1e-4, 0.99) == pytest.approx(tv, rel=1e-3)


def test_identical_counts_agree_and_disjoint_supports_do_not() -> None:
    counts = np.array([30, 20, 10, 40])
    assert two_sample_test(counts, counts).pvalue == pytest.approx(1.0)
    assert two_sample_test(np.array([100, 0]), np.array([0, 100])).pvalue < 1e-30


def test_an_empty_arm_or_group_decides_nothing() -> None:
    empty = two_sample_test(np.zeros(4), np.array([1, 2, 3, 4]))
    assert (empty.pvalue, empty.df, empty.groups) == (1.0, 0, 0)
    assert empty.min_detectable_tv(1e-3) == 1.0
    grouped = two_sample_test(np.array([[10, 20], [0, 0]]), np.array([[12, 18], [5, 5]]))
    assert grouped.groups == 1 and grouped.df == 1


def test_arms_of_different_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="one shape"):
        two_sample_test(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="non-negative"):
        two_sample_test(np.array([1, -1]), np.array([1, 1]))
