"""Decisions inside a false-positive budget: Bonferroni shares, two stages, sequential stopping."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _stats_sim import draw, most_rejections, rate_interval, rng

from specverify.stats import (
    AlphaBudget,
    SequentialTest,
    confirmation_alpha,
    gof_pvalues,
    least_favourable,
    mixture_log_e_value,
    plan_two_stage,
    samples_needed,
)


def test_budget_shares_sum_to_the_total_whatever_the_number_of_decisions() -> None:
    budget = AlphaBudget(1e-4)
    assert budget.split(7) * 7 == pytest.approx(1e-4)
    assert sum(budget.spend(j) for j in range(1, 200_000)) == pytest.approx(1e-4, rel=1e-5)
    assert sum(budget.spend(j) for j in range(1, 200_000)) <= 1e-4
    with pytest.raises(ValueError):
        AlphaBudget(0.0)


def test_confirmation_level_keeps_the_decision_within_alpha() -> None:
    for screens, screen_alpha, confirmations in [(20, 1e-3, 2), (6, 1e-2, 1), (1, 1e-3, 1), (300, 1e-2, 2)]:
        level = confirmation_alpha(1e-4, screens, screen_alpha, confirmations)
        assert min(1.0, screens * screen_alpha) * confirmations * level <= 1e-4 * (1 + 1e-12)
        assert level <= 0.5


def _two_stage_runs(name: str, law: np.ndarray, alternative: np.ndarray, plan, runs: int) -> np.ndarray:
    """Failures of ``runs`` two-stage decisions: any of ``plan.screens`` screens alarms, then a
    confirmation on fresh samples rejects.  Every stage is gof_test on its own draws."""
    screens = draw(rng("screen", name), alternative, plan.screen_samples, runs * plan.screens)
    screen_p = gof_pvalues(screens, law, alpha=plan.screen_alpha).reshape(runs, plan.screens)
    alarmed = (screen_p <= plan.screen_alpha).any(axis=1)
    confirmed = np.zeros(runs, dtype=bool)
    if alarmed.any():
        fresh = draw(rng("confirm", name), alternative, plan.confirm_samples, int(alarmed.sum()))
        confirmed[alarmed] = gof_pvalues(fresh, law, alpha=plan.confirm_alpha) <= plan.confirm_alpha
    return confirmed


def test_two_stage_decision_keeps_its_false_positive_rate() -> None:
    """At levels large enough to count: alpha 0.05 from 2 screens at 0.1 and confirmation at 0.25."""
    law = np.full(8, 1 / 8)
    plan = plan_two_stage(0.05, 7, 0.05, screens=2, screen_alpha=0.1)
    assert plan.confirm_alpha == pytest.approx(0.25)
    runs = 10_000
    failures = int(_two_stage_runs("null", law, law, plan, runs).sum())
    assert failures <= most_rejections(runs, plan.alpha)
    # and it is what independence of the stages predicts, (1 - 0.9**2) * 0.25
    low, high = rate_interval(runs, (1 - 0.9**2) * 0.25)
    assert low <= failures / runs <= high


def test_two_stage_decision_keeps_its_power() -> None:
    law = np.full(16, 1 / 16)
    plan = plan_two_stage(0.02, 15, 1e-6, screens=1, screen_alpha=1e-3)
    detected = _two_stage_runs("alternative", law, least_favourable(law, 0.02), plan, 2_000)
    assert detected.mean() >= rate_interval(2_000, 0.99)[0]


def test_two_stage_saves_samples_on_a_correct_sampler() -> None:
    """Screen at 1e-2 then confirm: 0.61x the samples of one stage at 1e-6 (TV 0.01, 16 cells)."""
    plan = plan_two_stage(0.01, 15, 1e-6, screens=1, screen_alpha=1e-2)
    assert plan.false_positive_bound <= 1e-6 * (1 + 1e-12)
    assert plan.single_stage_samples == samples_needed(0.01, 15, 1e-6, 0.99)
    assert plan.cost_ratio == pytest.approx(0.61, abs=0.01)
    # the battery's screen level 1e-3 saves less, and shrinking a false alarm eats into it
    assert plan_two_stage(0.01, 15, 1e-6, screens=1, screen_alpha=1e-3).cost_ratio == pytest.approx(0.73, abs=0.01)


def _stopping_times(
    name: str, law: np.ndarray, alternative: np.ndarray, tv: float, alpha: float, looks: np.ndarray, runs: int
) -> np.ndarray:
    """Samples at which each run's e-value first reaches 1/alpha (inf if never), checked at ``looks``."""
    generator = rng("sequential", name)
    counts = np.zeros((runs, 1, law.size))
    stopped = np.full(runs, np.inf)
    previous = 0
    for look in looks:  # loops over looks, vectorised over runs
        counts[:, 0] += generator.multinomial(int(look - previous), alternative, size=runs)
        previous = look
        crossed = (mixture_log_e_value(counts, law[None, :], tv) >= math.log(1 / alpha)) & np.isinf(stopped)
        stopped[crossed] = look
    return stopped


def test_sequential_test_keeps_alpha_under_optional_stopping() -> None:
    """Looking 300 times, up to 20x the fixed-sample size: rejected at most alpha of the time."""
    law = np.full(16, 1 / 16)
    looks = np.unique(np.geomspace(10, 20 * samples_needed(0.01, 15, 1e-6), 300).astype(int))
    runs = 4_000
    stopped = _stopping_times("null", law, law, 0.01, 0.05, looks, runs)
    assert int(np.isfinite(stopped).sum()) <= most_rejections(runs, 0.05)


def test_sequential_test_stops_failing_runs_early() -> None:
    """TV 0.01 planted, 16 cells, alpha 1e-6: median stop ~0.6x the fixed-sample n (2.0e5)."""
    law = np.full(16, 1 / 16)
    fixed = samples_needed(0.01, 15, 1e-6, 0.99)
    looks = np.unique(np.linspace(fixed / 200, 2 * fixed, 400).astype(int))
    stopped = _stopping_times("alternative", law, least_favourable(law, 0.01), 0.01, 1e-6, looks, 1_000)
    assert np.isfinite(stopped).all()
    assert 0.5 * fixed <= np.median(stopped) <= 0.7 * fixed
    assert np.quantile(stopped, 0.9) < fixed


def test_sequential_test_object_matches_the_vectorised_e_value() -> None:
    law = np.array([0.4, 0.3, 0.2, 0.1])
    test = SequentialTest(law, alpha=1e-3, tv=0.05)
    generator = rng("object")
    total = np.zeros(4, dtype=np.int64)
    for _ in range(5):
        batch = generator.multinomial(500, law)
        total += batch
        test.update(batch)
        assert test.log_e_value == pytest.approx(
            float(mixture_log_e_value(total[None, None, :], law[None, :], 0.05)[0])
        )
    assert test.samples == 2_500
    assert not test.rejected
    assert test.update(np.array([0, 0, 0, 400])) and test.rejected  # an obvious excess
    impossible = SequentialTest(np.array([0.5, 0.5, 0.0]), alpha=1e-3, tv=0.05)
    assert impossible.update(np.array([3, 3, 1])) and impossible.e_value == math.exp(700.0)
