"""loop.history[kind]: posed only to loops that declare the parameters; a failure names the parameter."""

from __future__ import annotations

import dataclasses

from specverify._run._driver import check_loop
from specverify.checks._loop import LoopCheck, loop_battery
from specverify.checks._loop_history import HISTORY_KINDS
from specverify.samplers._loop_reference import LoopReference
from specverify.zoo._loops import LOOP_MEMBERS


def test_every_history_kind_is_in_the_battery():
    assert {c.case for c in loop_battery() if c.name == "history"} == set(HISTORY_KINDS)
    assert all(LoopCheck("history", kind).statistical for kind in HISTORY_KINDS)


def test_a_loop_that_does_not_declare_the_parameters_is_not_posed_them():
    memoryless = LoopReference()
    memoryless.parameters = ("temperature", "top_k", "top_p", "min_p")
    result = check_loop(memoryless, budget="quick", select=["loop.history[*]"], isolation="in-process")
    assert [c.status for c in result.checks] == ["skip"] * len(HISTORY_KINDS)
    assert "repetition_penalty" in result.checks[0].message


def test_a_history_failure_names_the_parameter_group():
    member = LOOP_MEMBERS["penalties-ignored-at-verified-rows"]
    result = check_loop(member.loop, budget="quick", seed=0, select=["loop.history[penalties]"], isolation="in-process")
    (check,) = result.checks
    assert check.status == "fail" and check.finding == "loss"
    assert "penalty" in check.evidence["where"] and "_penalty=" in check.message


def test_the_pair_law_by_position_separates_a_state_that_misses_the_steps_drafts():
    relaxed = LOOP_MEMBERS["relaxed-penalty-state"].loop
    for loop, status in ((LoopReference(), "pass"), (relaxed, "fail")):
        result = check_loop(loop, budget="quick", seed=1, select=["loop.history[positions]"], isolation="in-process")
        assert result.checks[0].status == status, result.checks[0].message


class _StopsIgnored(LoopReference):
    def __call__(self, target, draft, prompt, num_tokens, params, generator=None):
        return super().__call__(
            target, draft, prompt, num_tokens, dataclasses.replace(params, stop_tokens=None), generator
        )


def test_a_loop_that_runs_past_its_stop_token_breaks_the_contract():
    result = check_loop(_StopsIgnored(), budget="quick", select=["loop.history[stop]"], isolation="in-process")
    (check,) = result.checks
    assert check.status == "fail" and check.finding == "contract"
    assert "stop-token rule" in check.message and "after its stop token" in check.message


def test_an_outcome_of_probability_zero_is_a_support_failure():
    member = LOOP_MEMBERS["min-tokens-bonus-only"]
    result = check_loop(
        member.loop, budget="quick", seed=0, select=["loop.history[min-tokens]"], isolation="in-process"
    )
    (check,) = result.checks
    assert check.status == "fail" and check.finding == "support" and result.verdict == "non-conformant"
    assert "min_tokens=" in check.message and "probability 0" in check.message


def test_a_loop_that_declares_some_of_a_kinds_parameters_is_posed_the_groups_it_takes():
    from specverify.checks._loop_history import posable

    assert posable("penalties", {"temperature", "repetition_penalty"}) == [{"repetition_penalty": 2.5}]
    assert posable("mixed", {"temperature", "top_k"}) == []  # the group without history parameters alone: not posed
    assert LoopCheck("history", "penalties").skip_reason(_Declaring(("repetition_penalty",))) is None
    assert "frequency_penalty" in LoopCheck("history", "positions").skip_reason(_Declaring(("repetition_penalty",)))


class _Declaring:
    def __init__(self, parameters):
        self.parameters = ("temperature", *parameters)


def test_one_law_under_two_drafters_needs_no_convention_and_separates_a_state_that_depends_on_what_was_accepted():
    # a loop that counts the prompt as another engine does follows one law whatever its drafter; a state
    # that misses the step's drafts or records rejected ones does not
    for name, status in (
        ("loop-reference", "pass"),
        ("declares-vllm-penalties-count-output-only", "pass"),
        ("relaxed-penalty-state", "fail"),
        ("rejected-drafts-recorded", "fail"),
    ):
        loop = LOOP_MEMBERS[name].loop
        result = check_loop(loop, budget="quick", seed=0, select=["loop.history[drafters]"], isolation="in-process")
        (check,) = result.checks
        assert check.status == status, (name, check.message)
        assert check.evidence["two_sample"]["samples"][0] == check.evidence["two_sample"]["samples"][1] > 0
    assert check.finding == "loss" and "with the near drafter" in check.message
