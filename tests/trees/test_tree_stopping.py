"""Fewer trees to a verdict: a law decision's sequential stop keeps its level, stops a failing
sampler early and leaves a passing one its planned rows; the acceptance is tallied on the
target-law's trees."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import specverify
from specverify.checks._tree_tally import CHUNK_ROWS, FIRST_LOOK, SEQUENTIAL_SHARE, LawDecision
from specverify.samplers import tree_reference
from specverify.stats import gof_test, samples_needed
from specverify.zoo import TREE_MEMBERS

#: A simulated level is held to the binomial bound it exceeds with this probability at most.
FALSE_FAILURE = 1e-6


def _looks(rows: int) -> list[int]:
    """The rows at which the family's draw looks: chunks doubling from FIRST_LOOK up to a call."""
    looks, size, done = [], FIRST_LOOK, 0
    while done < rows:
        done = min(rows, done + size)
        looks.append(done)
        size = min(CHUNK_ROWS, 2 * size)
    return looks


def test_a_law_decision_splits_its_level_between_the_fixed_and_the_sequential_test() -> None:
    decision = LawDecision(np.full(8, 1 / 8), alpha=1e-3, tv=0.05)
    assert decision.fixed_alpha == pytest.approx(
        1e-3 * (1 - SEQUENTIAL_SHARE)
    ) and decision.test.alpha == pytest.approx(1e-3 * SEQUENTIAL_SHARE)
    decision.test.log_e_value = math.log(1 / (1e-3 * SEQUENTIAL_SHARE))  # the e-value at its threshold: p exactly alpha
    assert decision.pvalue(1.0) == pytest.approx(1e-3)
    decision.test.log_e_value = 0.0
    assert decision.pvalue(0.9e-3) == pytest.approx(1e-3) and decision.pvalue(0.5) == pytest.approx(0.5 / 0.9)


def test_a_law_decision_keeps_its_level_under_the_familys_looks() -> None:
    """Null law, 12 cells, alpha 0.1 (its e-process at 0.01), the rows a fixed test at 0.09 needs
    for TV 0.05, looked at as the family looks: the decision rejects at most alpha of 1,500 runs
    (a bound exceeded with probability 1e-6 if its level holds)."""
    law = np.random.default_rng(0).dirichlet(np.ones(12))
    alpha, runs = 0.1, 1_500
    rows = samples_needed(0.05, 11, alpha * (1 - SEQUENTIAL_SHARE))
    g = np.random.default_rng(1)
    rejected = 0
    for run in range(runs):
        decision, counts, previous = LawDecision(law, alpha, 0.05, planned=rows), np.zeros(12, dtype=np.int64), 0
        for look in _looks(rows):
            chunk = g.multinomial(look - previous, law)
            counts, previous = counts + chunk, look
            if decision.watch(chunk):
                break
        test = gof_test(counts, law, alpha=decision.fixed_alpha, random_state=run)
        rejected += decision.pvalue(test.pvalue) <= alpha
    assert rejected <= stats.binom.isf(FALSE_FAILURE, runs, alpha)


def test_a_failing_sampler_stops_early_and_says_where() -> None:
    member = TREE_MEMBERS["tree-duplicate-siblings-counted-twice"]
    [result] = specverify.check(
        member, budget="quick", seed=0, select=["trees.conditional[[]duplicates]"], isolation="in-process"
    ).checks
    evidence = result.evidence
    assert (
        result.status == "fail"
        and result.finding == "non-canonical"
        and result.p_value is not None
        and result.p_value <= result.alpha
    )
    assert evidence["stopped_early"] is True and result.samples == FIRST_LOOK < evidence["planned_rows"]
    assert evidence["sequential_alpha"] + evidence["fixed_alpha"] == pytest.approx(result.alpha)
    assert f"stopped after {FIRST_LOOK} of {evidence['planned_rows']} rows" in (result.message or "")


def test_a_passing_sampler_draws_its_planned_rows_once_for_two_decisions() -> None:
    result = specverify.check(
        tree_reference, budget="quick", seed=0, select=["trees.target-law[[]chain]"], isolation="in-process"
    )
    law, acceptance = result.checks
    assert (law.id, acceptance.id) == ("trees.target-law[chain]", "trees.acceptance[chain]")
    assert law.status == acceptance.status == "pass" and law.evidence["stopped_early"] is False
    assert law.samples == acceptance.samples == law.evidence["planned_rows"]  # one draw, two tests
    # the sampler's rows: that draw and the one row of the first call before the battery (_calling/first_call)
    assert result.run["sampler_rows"] == law.samples + 1
    assert (
        acceptance.evidence["tallied_with"] == law.id and law.alpha == 2 * acceptance.alpha
    )  # each its own share (acceptance: the low side)
