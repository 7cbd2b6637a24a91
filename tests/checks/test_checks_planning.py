"""Planning (``specverify.checks._plan``): which checks run, and each one's Bonferroni share.

Planning reads only the sampler's declared capabilities, so no sampler runs here.
"""

from __future__ import annotations

import pytest
import torch

import specverify
from specverify._budgets import get_budget
from specverify._calling import SamplerUnderTest
from specverify.checks import battery
from specverify.checks._plan import plan, result_ids

BUDGET = get_budget("quick")
#: The reference takes every check but fit.unnormalised (it declares no unnormalised=True), so every
#: other statistical decision of the battery shares the budget.
DECISIONS = sum(c.decisions for c in battery() if c.statistical and c.id != "fit.unnormalised[random]")


def declared(**capabilities):
    @specverify.sampler(name="declared", **capabilities)
    def fn(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        raise AssertionError("planning never calls the sampler")

    return SamplerUnderTest(fn)


def spent(planned) -> float:
    """The false-positive budget the planned checks spend: share times decisions, over those that run."""
    return sum(p.alpha * p.check.decisions for p in planned if p.skip_reason is None)


def test_the_reference_battery_splits_alpha_evenly_over_its_decisions():
    planned = plan(SamplerUnderTest(specverify.reference), BUDGET)
    statistical = [p for p in planned if p.check.statistical]
    assert DECISIONS > 20 and {p.alpha for p in statistical} == {BUDGET.alpha / DECISIONS}
    assert {p.alpha for p in planned if not p.check.statistical} == {0.0}  # exact checks spend nothing
    assert [p.id for p in planned if p.skip_reason] == ["fit.unnormalised[random]"]  # it declares no unnormalised=True
    assert spent(planned) == pytest.approx(BUDGET.alpha, rel=1e-12)


def test_skipped_checks_take_no_share_and_say_why():
    planned = plan(declared(canonical=False, dtypes=(torch.float64,)), BUDGET)
    skipped = {p.id: p.skip_reason for p in planned if p.skip_reason and p.id != "fit.unnormalised[random]"}
    assert skipped and all("canonical=False" in reason for reason in skipped.values())
    assert {p.check.proves for p in planned if p.id in skipped} == {"non-canonical"}
    assert spent(planned) == pytest.approx(BUDGET.alpha, rel=1e-12)  # the running checks share it all
    running = sum(p.check.decisions for p in planned if p.check.statistical and p.skip_reason is None)
    assert running < DECISIONS and {p.alpha for p in planned if p.check.statistical} == {BUDGET.alpha / running}


def test_a_sampler_without_injected_uniforms_skips_the_uniform_driven_checks_only():
    planned = plan(declared(uniforms=False), BUDGET)
    skipped = [p.id for p in planned if p.skip_reason and p.id != "fit.unnormalised[random]"]
    assert skipped == ["exact.uniform-driven[random]", "exact.uniform-driven[zeros]", "exact.uniform-driven[low-precision]", "shapes.uniform-driven"]
    # exact checks hold no share, so skipping them leaves every statistical share as it was
    assert {p.alpha for p in planned if p.check.statistical} == {BUDGET.alpha / DECISIONS}


def test_a_selection_plans_only_what_it_names_and_gives_it_the_whole_budget():
    sut = SamplerUnderTest(specverify.reference)
    family = plan(sut, BUDGET, ["efficiency"])
    assert [p.id for p in family] == ["efficiency.acceptance[seed-chain]", "efficiency.acceptance[random]"]
    assert {p.alpha for p in family} == {BUDGET.alpha / 2}
    (one,) = plan(sut, BUDGET, ["fit.conditional[random]"])  # brackets taken literally
    assert one.id == "fit.conditional[random]" and one.alpha == BUDGET.alpha
    by_decision = plan(sut, BUDGET, ["fit.step[chain]"])  # a decision's id selects its check
    assert [result_ids(p.check) for p in by_decision] == [["fit.first-token[chain]", "fit.step[chain]", "fit.position[chain]"]]
    assert by_decision[0].alpha == BUDGET.alpha / 3


def test_a_selection_that_matches_nothing_is_a_usage_error():
    with pytest.raises(ValueError, match="no check matches"):
        plan(SamplerUnderTest(specverify.reference), BUDGET, ["no-such-check"])
