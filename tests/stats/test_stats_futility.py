"""Futility looks: the power of the fixed-sample decision is kept, and a passing run stops early."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specverify.stats import FutilityPlan, gof_test, least_favourable, samples_needed


LAW = np.array([0.3, 0.25, 0.2, 0.1, 0.08, 0.05, 0.02])


def test_a_deviation_of_the_planned_size_is_still_detected_with_the_planned_power():
    plan = FutilityPlan(tv=0.05, df=LAW.size - 1, alpha=1e-3, power=0.99)
    truth = least_favourable(LAW, plan.tv)  # the deviation of that size hardest to see
    rng = np.random.default_rng(0)
    runs = 4_000
    outcomes = [plan.simulate(LAW, truth, rng) for _ in range(runs)]
    misses = sum(not rejected for rejected, _ in outcomes)
    # the plan misses at most 1 - power = 1%: allow the binomial's 1e-6 upper tail above it
    assert misses <= stats.binom.isf(1e-6, runs, 1 - plan.power)
    # the looks stop some of these runs (each may stop 1/714 of them): the bound is not vacuous
    assert any(samples < plan.final_samples for _, samples in outcomes)


def test_a_conforming_sampler_stops_at_about_half_the_fixed_sample():
    plan = FutilityPlan(tv=0.05, df=LAW.size - 1, alpha=1e-3, power=0.99)
    fixed = samples_needed(plan.tv, plan.df, plan.alpha, plan.power)
    rng = np.random.default_rng(1)
    outcomes = [plan.simulate(LAW, LAW, rng) for _ in range(2_000)]
    # level 1e-3 (a look only accepts): at most the binomial's 1e-6 upper tail of 2,000 such tests
    assert sum(rejected for rejected, _ in outcomes) <= stats.binom.isf(1e-6, len(outcomes), plan.alpha)
    mean = np.mean([samples for _, samples in outcomes])
    assert plan.final_samples > fixed  # the final test is sized for 0.3 of the miss probability
    assert mean < 0.6 * fixed


def test_a_look_never_stops_what_it_cannot_bound():
    plan = FutilityPlan(tv=0.05, df=LAW.size - 1, alpha=1e-3, power=0.99)
    near = gof_test(np.round(LAW * 5_000).astype(np.int64), LAW, alpha=plan.alpha)
    assert near.method == "g-test" and plan.futile(near)
    far = gof_test(np.round(least_favourable(LAW, 0.2) * 5_000).astype(np.int64), LAW, alpha=plan.alpha)
    assert far.pvalue <= plan.alpha and not plan.futile(far)
    small = gof_test(np.array([5, 3, 2]), np.array([0.5, 0.3, 0.2]), alpha=plan.alpha)
    assert small.method == "exact" and not plan.futile(small)  # the bound is the asymptotic law's
    pooled = gof_test(np.array([30, 3, 0, 1]), np.array([0.9, 0.08, 0.019, 0.001]), alpha=plan.alpha)
    assert pooled.merged_mass > 0 or pooled.rare_expected > 0 or pooled.method not in ("g-test", "pearson")
    assert not plan.futile(pooled)


def test_a_decision_claims_its_final_tests_reach_whether_a_look_stopped_it_or_not():
    plan = FutilityPlan(tv=0.05, df=LAW.size - 1, alpha=1e-3, power=0.99)
    fixed = samples_needed(plan.tv, plan.df, plan.alpha, plan.power)
    assert fixed < plan.final_samples < 1.15 * fixed  # the final test is sized for 0.3 of the miss probability
    assert all(0 < a < b < plan.final_samples for a, b in zip(plan.look_samples, plan.look_samples[1:]))
    finished = gof_test(np.round(LAW * plan.final_samples).astype(np.int64), LAW, alpha=plan.alpha)
    stopped = gof_test(np.round(LAW * plan.look_samples[0]).astype(np.int64), LAW, alpha=plan.alpha)
    assert plan.claim(finished) == plan.claim(stopped) == pytest.approx(plan.tv, rel=1e-3)
    forbidding = np.append(LAW, 0.0)  # a forbidden outcome adds what one sample there would need
    tests = [gof_test(np.append(np.round(LAW * n).astype(np.int64), 0), forbidding, alpha=plan.alpha) for n in (plan.look_samples[0], plan.final_samples)]
    assert plan.claim(tests[0]) == plan.claim(tests[1]) > plan.claim(finished)


def test_a_forbidden_outcome_lowers_the_bound_to_the_deviation_left_on_the_compared_cells():
    plan = FutilityPlan(tv=0.05, df=LAW.size - 1, alpha=1e-3, power=0.99)
    n = plan.look_samples[0]
    left = plan.tv - np.log(1 / plan.look_miss) / n
    assert plan.bound(n, plan.df, forbidden=True) == pytest.approx(stats.ncx2.ppf(plan.look_miss, plan.df, 4 * left**2 * n))
    assert plan.bound(n, plan.df, forbidden=True) < plan.bound(n, plan.df)
    assert plan.bound(10, plan.df, forbidden=True) == 0.0  # too few samples to bound anything: no stop


@pytest.mark.parametrize(
    "bad", [dict(tv=0.0), dict(alpha=1.0), dict(power=1.0), dict(df=0), dict(looks=()), dict(looks=(0.5, 0.25)), dict(looks=(0.5, 1.0)), dict(final_share=0.0), dict(final_share=1.0)],
)
def test_a_plan_out_of_range_is_refused(bad):
    settings = dict(tv=0.05, df=3, alpha=1e-3, power=0.99) | bad
    with pytest.raises(ValueError):
        FutilityPlan(**settings)
