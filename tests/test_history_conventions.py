"""Engines' conventions for the tokens the history parameters count, and the convention finding:
a loop that counts the prompt as another engine does is told apart from a speculation bug, both ways."""

from __future__ import annotations

import torch

from specverify._history import HISTORY_CONVENTIONS, history_logits
from specverify._history.posing import posed_params
from specverify._record.evidence import unknown_keys
from specverify._record.result import CheckResult, judge
from specverify._run._driver import check_loop
from specverify.zoo._loops import LOOP_MEMBERS

LOGITS = torch.tensor([[2.0, -1.0, 0.5, 0.0]], dtype=torch.float64)
HISTORY = torch.tensor([[-1, 0, 1, 1, 2]])  # prompt [0, 1] (2 tokens), generated [1, 2]
NAMES = ("repetition_penalty", "frequency_penalty", "presence_penalty", "penalty_window", "bad_words")


def processed(convention: str, **group) -> torch.Tensor:
    params = posed_params([group], torch.zeros(1, dtype=torch.int64), NAMES)
    return HISTORY_CONVENTIONS[convention].processors(LOGITS, HISTORY, 2, params)


def test_each_convention_counts_its_own_tokens():
    # repetition: vLLM over prompt and generated tokens (0, 1, 2), output-only over the generated ones (1, 2)
    assert processed("vllm", repetition_penalty=2.0).tolist() == [[1.0, -2.0, 0.25, 0.0]]
    assert processed("output-only", repetition_penalty=2.0).tolist() == [[2.0, -2.0, 0.25, 0.0]]
    # frequency: vLLM over the generated tokens (1 once), prompt-and-output over all (0 once, 1 twice)
    assert processed("vllm", frequency_penalty=0.5).tolist() == [[2.0, -1.5, 0.0, 0.0]]
    assert processed("prompt-and-output", frequency_penalty=0.5).tolist() == [[1.5, -2.0, 0.0, 0.0]]
    # a window the request sets is its own, whatever the convention
    windowed = processed("prompt-and-output", frequency_penalty=0.5, penalty_window=1)
    assert torch.equal(windowed, processed("vllm", frequency_penalty=0.5, penalty_window=1))
    # bad words: [0, 1] ends the prompt, not the generated tokens: banned after it only across the prompt
    assert processed("vllm", bad_words=[[1, 0]]).tolist() == LOGITS.tolist()
    banned = HISTORY_CONVENTIONS["bad-words-in-prompt"].processors(
        LOGITS,
        torch.tensor([[-1, -1, 0, 1]]),
        2,
        posed_params([{"bad_words": [[1, 0]]}], torch.zeros(1, dtype=torch.int64), NAMES),
    )
    assert banned.tolist() == [[-torch.inf, -1.0, 0.5, 0.0]]
    assert torch.equal(
        HISTORY_CONVENTIONS["vllm"].processors(
            LOGITS, HISTORY, 2, posed_params([{}], torch.zeros(1, dtype=torch.int64), NAMES)
        ),
        history_logits(LOGITS, HISTORY, 2, posed_params([{}], torch.zeros(1, dtype=torch.int64), NAMES)),
    )


def test_a_loop_counting_as_another_engine_is_a_convention_finding_not_a_loss():
    for name, check, convention in (
        ("declares-vllm-penalties-count-output-only", "loop.history[penalties]", "output-only"),
        ("declares-vllm-bad-words-match-prompt", "loop.history[bad-words]", "bad-words-in-prompt"),
    ):
        member = LOOP_MEMBERS[name]
        result = check_loop(member.loop, budget="quick", seed=0, select=[check], isolation="in-process")
        (found,) = result.checks
        assert found.status == "inconclusive" and found.evidence["convention"] == convention, found.message
        assert f"fit the '{convention}' convention's exact law" in found.message
        assert found.evidence["convention_pvalue"] > found.alpha and found.p_value <= found.alpha
        assert unknown_keys(found.to_json()["evidence"]) == []
        assert result.verdict == member.verdict == "inconclusive"


def test_a_speculation_bug_is_still_a_loss_with_no_convention_named():
    result = check_loop(
        LOOP_MEMBERS["relaxed-penalty-state"].loop, budget="quick", seed=0, select=["loop.history[penalties]"]
    )
    (failed,) = result.checks
    assert failed.status == "fail" and failed.finding == "loss" and "convention" not in failed.evidence


def test_the_verdict_names_the_convention():
    found = CheckResult(
        id="loop.history[penalties]", family="loop", status="inconclusive", evidence={"convention": "output-only"}
    )
    judged = judge([found])
    assert judged.verdict == "inconclusive" and "by the output-only convention, not by the history law judged by" in (
        judged.reason or ""
    )


def test_the_presets_formulas_and_orders_by_hand():
    from specverify._history.presets import HISTORY_PRESETS

    seen = torch.tensor([[2, 0]])  # prompt [2], generated [0]
    params = posed_params(
        [{"repetition_penalty": 2.0, "presence_penalty": 1.0}], torch.zeros(1, dtype=torch.int64), NAMES
    )
    row = torch.tensor([[1.0, 0.5, -1.0]], dtype=torch.float64)
    # vLLM and llama.cpp: repetition first (1 / 2), then presence (- 1); the prompt's token 2 is repeated too
    assert HISTORY_PRESETS["vllm"](row, seen, 1, params).tolist() == [[-0.5, 0.5, -2.0]]
    # llama.cpp also counts the prompt's 2 for presence (a window of 64 over prompt and generated tokens)
    assert HISTORY_PRESETS["llama.cpp"](row, seen, 1, params).tolist() == [[-0.5, 0.5, -3.0]]
    # SGLang: presence first (1 - 1 = 0), then repetition (0 / 2), over the generated tokens only
    assert HISTORY_PRESETS["sglang"](row, seen, 1, params).tolist() == [[0.0, 0.5, -1.0]]


def test_the_separating_cases_separate_every_pair_of_presets():
    from specverify._history.presets import HISTORY_PRESETS, HISTORY_SEPARATING, history_differences

    for name, processors in HISTORY_PRESETS.items():
        found = history_differences(processors)
        assert found[name] == (0.0, None)
        assert all(tv > 0.05 and case is not None for other, (tv, case) in found.items() if other != name)
    # the order case alone separates vLLM from SGLang
    order = next(c for c in HISTORY_SEPARATING if c.name == "presence before or after repetition")
    assert float((order.law(HISTORY_PRESETS["vllm"]) - order.law(HISTORY_PRESETS["sglang"])).abs().sum()) > 0.1


def test_a_loop_declaring_sglang_with_vllms_penalties_is_named_vllm():
    member = LOOP_MEMBERS["declares-sglang-penalties-as-vllm"]
    assert (
        set(member.loop.parameters) >= {"repetition_penalty", "min_tokens"}
        and "bad_words" not in member.loop.parameters
    )
    result = check_loop(member.loop, budget="quick", seed=0, select=["loop.history[penalties]"], isolation="in-process")
    (found,) = result.checks
    assert found.status == "inconclusive" and found.evidence["convention"] == "vllm", found.message
    assert "not sglang's (the history law judged by)" in found.message
