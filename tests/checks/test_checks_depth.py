"""The depth tier of a search at a small TV (``Budget.depth_examples``), with scripted evaluations.

Cases are integers and an evaluation's samples grow with the case, so "the largest case" is the
largest integer screened; the TV an evaluation is sized for is read from the context, as the fit
checks read it.  Every assertion is exact.
"""

from __future__ import annotations

from hypothesis import strategies as st

from specverify._budgets import BUDGETS, COVERAGE_TV, budget_for_tv, depth_for
from specverify._record.reach import Reach
from specverify.checks._base import Decision
from specverify.checks._search import Outcome, decisions_from_search, search_and_confirm
from specverify.stats import confirmation_alpha

from ._fakes import fake_context

DEEP_TV = 0.001


def run(deviates, *, deep=1, examples=20):
    """A search whose evaluations claim the TV they were sized for; ``deviates(case, tv)`` says
    whether a test sized for ``tv`` rejects on ``case``."""
    ctx = fake_context(tv=DEEP_TV, depth_examples=deep, coverage_tv=COVERAGE_TV)
    calls: list[tuple[int, str, float]] = []

    def evaluate(case, seed, alpha, stage):
        tv = ctx.budget.tv
        calls.append((case, stage, tv))
        ctx.reached.append(Reach((case + 2, case + 2), (1, 1), (1, 1), 1, ("float64",), ((1, case + 2),)))
        return Outcome({"d": 0.0 if deviates(case, tv) else 0.5}, 1000 * (case + 1), {"d": tv})

    found = search_and_confirm(ctx, "test.depth", st.integers(0, 40), evaluate, str, examples=examples)
    return ctx, found, calls


def test_the_coverage_screens_are_sized_for_the_coverage_tv_and_the_largest_case_again_for_the_tv_asked():
    ctx, found, calls = run(lambda case, tv: False)
    screens = [(c, tv) for c, stage, tv in calls if stage == "screen"]
    deep = [(c, tv) for c, stage, tv in calls if stage == "deep"]
    assert screens and all(tv == COVERAGE_TV for _, tv in screens)
    assert deep == [(max(c for c, _ in screens), DEEP_TV)]  # the largest case screened, at the TV asked
    assert ctx.budget.tv == DEEP_TV  # the coverage TV held only during the coverage screens
    # the check's reach is the deep test's alone: the claim is made on it
    assert [r.vocab for r in ctx.reached] == [(deep[0][0] + 2,) * 2]
    assert found.depth is not None and found.depth.coverage_reach is not None
    assert found.depth.coverage_reach.vocab[0] < found.depth.coverage_reach.vocab[1]


def test_the_decision_claims_the_deep_tests_tv_and_records_the_coverage():
    ctx, found, _ = run(lambda case, tv: False)
    (result,) = decisions_from_search(
        ctx, [Decision("d", "test", None, "loss")], found, lambda c: {"case": c}, lambda *a: ""
    )
    assert result.status == "pass" and result.min_detectable_tv == DEEP_TV
    depth = result.evidence["depth"]
    assert depth["coverage_tv"] == COVERAGE_TV and depth["coverage_claim"] == COVERAGE_TV
    assert depth["deep_examples"] == 1 and depth["deep_claim"] == DEEP_TV
    assert "the 1 largest tested again at TV 0.001" in result.message


def test_a_deviation_only_the_depth_tier_sees_is_confirmed_at_the_tv_asked():
    _, found, calls = run(lambda case, tv: tv == DEEP_TV)
    case, outcome = found.confirmed
    assert outcome.pvalues == {"d": 0.0}
    assert [(c, tv) for c, stage, tv in calls if stage == "confirm"] == [(case, DEEP_TV)]


def test_a_coarse_deviation_is_found_by_the_coverage_screens_and_no_deep_test_runs():
    _, found, calls = run(lambda case, tv: case >= 5)
    assert found.confirmed[0] == 5 and found.depth is None
    assert "deep" not in {stage for _, stage, _ in calls}


def test_the_deep_tests_count_in_the_confirmation_level():
    _, found, _ = run(lambda case, tv: False, deep=2)
    assert found.confirm_alpha == confirmation_alpha(1e-4, 20 + 2, BUDGETS["quick"].screen_alpha, confirmations=2)


def test_a_tv_budget_below_the_coverage_tv_gets_a_depth_tier_that_costs_about_what_the_coverage_costs():
    assert depth_for(0.01, 20) == (0, None) and depth_for(0.05, 6) == (0, None)
    assert depth_for(0.001, 60) == (1, COVERAGE_TV)  # at least one
    assert depth_for(0.005, 20) == (5, COVERAGE_TV)  # 20 * (0.005 / 0.01) ** 2
    budget = budget_for_tv(0.001)
    assert budget.depth_examples == 1 and budget.coverage_tv == COVERAGE_TV and "depth tier" in budget.derivation
    assert budget.shape_volume == BUDGETS["thorough"].shape_volume  # large V keeps its cap (it cannot reach 0.001)
    assert (
        budget_for_tv(0.01, "quick").shape_volume == BUDGETS["quick"].shape_volume * 25
    )  # no depth tier: scaled as before
    assert all(b.depth_examples == 0 for b in BUDGETS.values())  # the presets are unchanged


def test_screens_the_sampler_recorded_itself_stay_out_of_the_checks_reach():
    """One worker streams a check's units and records what they gave the sampler in its own
    recorder, not as units' reaches: the screens' share is set apart there too, so the claim is the
    deep test's, as with several workers (the JSON is the same for any worker count)."""
    ctx = fake_context(tv=DEEP_TV, depth_examples=1, coverage_tv=COVERAGE_TV)
    deep: list[int] = []

    def evaluate(case, seed, alpha, stage):
        ctx.sut.reach.record(batch=1, rows=1, k=1, vocab=case + 2, dtype="float64")
        if stage == "deep":
            deep.append(case)
        return Outcome({"d": 0.5}, 1000 * (case + 1), {"d": ctx.budget.tv})

    found = search_and_confirm(ctx, "test.depth", st.integers(0, 40), evaluate, str, examples=20)
    reach = ctx.sut.reach.snapshot()
    assert deep and reach is not None and reach.vocab == (deep[0] + 2,) * 2
    assert found.depth is not None and found.depth.coverage_reach is not None
    assert found.depth.coverage_reach.vocab[0] < found.depth.coverage_reach.vocab[1]
