"""Quick on a sampler called one row at a time is sized for TV 0.1 with a quarter of the shapes'
volume, and says so; nothing else changes (a batched sampler, another preset, a --tv budget)."""

from __future__ import annotations

from specverify._budgets import budget_for_calls, budget_for_tv, get_budget, resolve_budget
from specverify._run import Run
from specverify._run._driver import load_sut


def test_quick_on_a_one_row_sampler_is_sized_for_tv_0_1_and_says_why():
    quick = get_budget("quick")
    one_row = budget_for_calls(quick, batched=False)
    assert (one_row.tv, one_row.shape_volume) == (0.1, quick.shape_volume // 4)
    assert (one_row.alpha, one_row.power, one_row.examples) == (quick.alpha, quick.power, quick.examples)
    assert "one row at a time" in one_row.derivation and "--tv 0.05" in one_row.derivation


def test_nothing_else_is_sized_down():
    quick = get_budget("quick")
    assert budget_for_calls(quick, batched=True) is quick
    assert budget_for_calls(get_budget("standard"), batched=False) is get_budget("standard")
    asked = budget_for_tv(0.05, "quick")
    assert budget_for_calls(asked, batched=False) is asked  # --budget quick --tv 0.05 keeps quick's sizes


def test_a_run_of_a_one_row_sampler_records_the_budget_it_was_given():
    one_row = Run(load_sut("specverify.zoo:one_row_per_call", isolation="in-process"), resolve_budget("quick"))
    assert one_row.budget.tv == 0.1 and one_row.info.budget["tv"] == 0.1
    assert "one row at a time" in one_row.info.budget["derivation"]
    batched = Run(load_sut("specverify.zoo:reference_sampler", isolation="in-process"), resolve_budget("quick"))
    assert batched.budget.tv == 0.05
