"""The plan's fixed cost of a call is measured, never a 0 taken as measured: a group of direct calls
that the timing budget left untimed (a slow row-by-row sampler spends it on its units) still has its
one-row call timed, and a cost under 0.1 ms is printed with its digits, not as "0.0 ms"."""

from __future__ import annotations

import time

from specverify._run._rehearsal import Drawn, Rehearsed, _ms, time_groups


def _sleeping(seconds: float):
    def example(sut, rows, there):
        time.sleep(seconds)
        return rows

    return example


def test_a_call_group_past_the_timing_budget_still_has_its_fixed_cost_measured():
    units = Drawn("units", 2, 5, "float64", rows=10_000, example=_sleeping(0.002), largest=64)
    calls = Drawn("calls", 1, 3, "float64", rows=10, example=_sleeping(0.004), largest=4)
    rehearsed = [Rehearsed("a", {units.key: units}), Rehearsed("b", {calls.key: calls})]
    how = time_groups(rehearsed, sut=None, budget_s=0.0)  # the budget ends after the first (largest) group
    assert calls.seconds_per_call >= 0.004 and "0.0 ms a call" not in how
    assert "1 of 2 shapes timed" in how and " ms a call, " in how and " ms a unit, fixed" in how


def test_a_kind_of_call_never_drawn_is_said_untimed():
    units = Drawn("units", 2, 5, "float64", rows=100, example=_sleeping(0.0), largest=8)
    how = time_groups([Rehearsed("a", {units.key: units})], sut=None)
    assert "no call timed" in how


def test_small_costs_keep_their_digits():
    assert _ms(0.0025) == "2.5 ms" and _ms(0.00004) == "0.04 ms" and _ms(0.0) == "0 ms"
