"""Futility looks: the power of the fixed-sample decision is kept, and a passing run stops early."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

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
    assert not plan.futile(small, np.array([5.0, 3.0, 2.0]))  # ... and a cell expects 2 (the law normalised)
    big = gof_test(np.array([500, 300, 200]), np.array([0.5, 0.3, 0.2]), alpha=plan.alpha)
    assert big.method == "exact" and plan.futile(big, np.array([5.0, 3.0, 2.0]))  # each expects >= 10
    assert not plan.futile(gof_test(np.zeros(4, dtype=np.int64), np.array([0.5, 0.5, 0.0, 0.0])))  # no samples, no stop
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
    tests = [
        gof_test(np.append(np.round(LAW * n).astype(np.int64), 0), forbidding, alpha=plan.alpha)
        for n in (plan.look_samples[0], plan.final_samples)
    ]
    assert plan.claim(tests[0]) == plan.claim(tests[1]) > plan.claim(finished)


def test_a_forbidden_outcome_lowers_the_bound_to_the_deviation_left_on_the_compared_cells():
    plan = FutilityPlan(tv=0.05, df=LAW.size - 1, alpha=1e-3, power=0.99)
    n = plan.look_samples[0]
    forbidding = gof_test(np.append(np.round(LAW * n).astype(np.int64), 0), np.append(LAW, 0.0), alpha=plan.alpha)
    hidden = plan.hidden(forbidding)
    assert hidden == pytest.approx(np.log(1 / plan.look_miss) / forbidding.samples)
    left = plan.tv - hidden
    assert plan.bound(n, plan.df, hidden) == pytest.approx(stats.ncx2.ppf(plan.look_miss, plan.df, 4 * left**2 * n))
    assert plan.bound(n, plan.df, hidden) < plan.bound(n, plan.df)
    assert plan.bound(n, plan.df, plan.tv) == 0.0  # nothing left to bound: no stop


@pytest.mark.parametrize(
    "bad",
    [
        dict(tv=0.0),
        dict(alpha=1.0),
        dict(power=1.0),
        dict(df=0),
        dict(looks=()),
        dict(looks=(0.5, 0.25)),
        dict(looks=(0.5, 1.0)),
        dict(final_share=0.0),
        dict(final_share=1.0),
    ],
)
def test_a_plan_out_of_range_is_refused(bad):
    settings = dict(tv=0.05, df=3, alpha=1e-3, power=0.99) | bad
    with pytest.raises(ValueError):
        FutilityPlan(**settings)


def _moved(law: np.ndarray, tv: float, into: np.ndarray, moved: float) -> np.ndarray:
    """A law at TV ``tv`` from ``law``: ``moved`` put into the cells ``into`` (forbidden or rare
    ones), the support scaled down to make room and deviated least favourably for the rest."""
    support = law > 0

    def truth(on_support: float) -> np.ndarray:
        made = np.zeros_like(law)
        made[support] = (least_favourable(law[support], on_support) if on_support > 0 else law[support]) * (1.0 - moved)
        made[into] += moved / into.size
        return made / made.sum()

    def tv_of(on_support: float) -> float:
        return 0.5 * float(np.abs(truth(on_support) - law).sum()) - tv

    if moved == 0:
        return truth(tv)
    return truth(optimize.brentq(tv_of, 0.0, tv) if tv_of(0.0) < 0 else 0.0)


RARE = np.append(LAW, [2e-4, 2e-4, 2e-4]) / (1 + 6e-4)  # three cells a final sample expects ~1 of each
TWO = np.array([0.7, 0.3, 0.0, 0.0])  # an exact test on two cells, two forbidden outcomes
ONE = np.array([0.0, 1.0, 0.0])  # one possible outcome: every deviation is onto forbidden ones


@pytest.mark.parametrize(
    "law, into, moved",
    [
        (RARE, np.arange(7, 10), 0.0),
        (RARE, np.arange(7, 10), 0.002),  # just under what the rare count bounds (RARE_SHIFT * tv)
        (RARE, np.arange(7, 10), 0.01),
        (TWO, np.array([2, 3]), 0.0),
        (TWO, np.array([2, 3]), 0.001),
        (TWO, np.array([2, 3]), 0.05),
        (ONE, np.array([0, 2]), 0.05),
    ],
)
def test_laws_with_rare_pooled_or_forbidden_cells_stop_at_a_look_and_keep_the_power(law, into, moved):
    plan = FutilityPlan(
        tv=0.05, df=max(1, int((law > 0).sum()) - 1), alpha=1e-6, power=0.99
    )  # no Monte Carlo test at this level
    truth = _moved(law, plan.tv, into, moved)
    assert 0.5 * np.abs(truth - law).sum() == pytest.approx(plan.tv)
    rng = np.random.default_rng(7)
    runs = 2_000
    outcomes = [plan.simulate(law, truth, rng) for _ in range(runs)]
    assert sum(not rejected for rejected, _ in outcomes) <= stats.binom.isf(1e-6, runs, 1 - plan.power)
    null = [plan.simulate(law, law, rng) for _ in range(200)]
    assert np.mean([samples for _, samples in null]) < 0.8 * plan.final_samples  # the looks do stop these laws


def test_a_rare_count_above_what_the_shift_allows_stops_nothing():
    plan = FutilityPlan(tv=0.05, df=6, alpha=1e-6, power=0.99)
    n = plan.look_samples[-1]
    quiet = gof_test(np.append(np.round(LAW * n).astype(np.int64), [0, 1, 0]), RARE, alpha=plan.alpha)
    assert quiet.rare_expected > 0 and plan.hidden(quiet) is not None and plan.futile(quiet)
    busy = gof_test(np.append(np.round(LAW * n).astype(np.int64), [5, 5, 5]), RARE, alpha=plan.alpha)
    assert busy.pvalue > plan.alpha  # the tail alone does not reject 15 where ~3 are expected at this level...
    assert plan.hidden(busy) is None and not plan.futile(busy)  # ...but mass moved into it could hide tv's share


def test_a_stopped_decision_claims_what_its_final_test_would_have_pooled_not_what_its_look_pooled():
    plan = FutilityPlan(tv=0.05, df=9, alpha=1e-6, power=0.99)
    look = gof_test(np.round(RARE * plan.look_samples[0]).astype(np.int64), RARE, alpha=plan.alpha)
    final = gof_test(np.round(RARE * plan.final_samples).astype(np.int64), RARE, alpha=plan.alpha)
    # the rare tail's expected count, and so what the final test adds for it, is N's, not the look's
    assert look.rare_expected < final.rare_expected
    assert plan.claim(look, RARE) == pytest.approx(plan.claim(final, RARE), rel=1e-3)
    assert plan.claim(look) != pytest.approx(plan.claim(final), rel=1e-3)  # without the law, the look's tail


def test_what_a_look_takes_off_the_tv_is_each_part_a_deviation_may_hide():
    plan = FutilityPlan(tv=0.05, df=9, alpha=1e-6, power=0.99)
    n = plan.look_samples[-1]  # enough samples that one rare outcome rules out a shift of 0.05 tv into the tail
    rare = gof_test(np.append(np.round(LAW * n).astype(np.int64), [0, 1, 0]), RARE, alpha=plan.alpha)
    assert rare.rare_expected > 0 and rare.forbidden_cells == 0
    assert plan.hidden(rare) == pytest.approx(rare.merged_mass + rare.rare_expected / rare.samples + 0.05 * plan.tv)
    forbidding = np.append(RARE, 0.0)
    both = gof_test(np.append(np.round(LAW * n).astype(np.int64), [0, 1, 0, 0]), forbidding, alpha=plan.alpha)
    assert plan.hidden(both) == pytest.approx(plan.hidden(rare) + np.log(1 / plan.look_miss) / both.samples)
    # pooled cells holding more than tv hide all of it: no stop, however quiet the counts
    spread = np.append([0.5, 0.4], np.full(40, 0.1 / 40))
    pooled = gof_test(np.round(spread * 2_000).astype(np.int64), spread, alpha=plan.alpha)
    assert pooled.merged_mass >= plan.tv and plan.hidden(pooled) >= plan.tv and not plan.futile(pooled)
    with pytest.raises(ValueError):
        plan.claim(rare, np.stack([RARE, RARE]))
