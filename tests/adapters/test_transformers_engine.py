"""transformers' own generate() on real Llama models behind the engine contract (speculation on and off)."""

from __future__ import annotations

import pytest
import torch

from specverify._kinds import EngineInputs, EngineLayout
from specverify._warps.rules import SamplingParams

pytest.importorskip("transformers")

from specverify.adapters.transformers_engine import engine  # noqa: E402 - after the skip

ROWS, TOKENS = 3, 4


def _params(**values: float) -> SamplingParams:
    return SamplingParams(**{k: torch.full((ROWS,), v, dtype=torch.float64) for k, v in values.items()})


@pytest.mark.parametrize("drafter", ["assistant", "prompt-lookup"])
def test_both_modes_keep_the_contract_and_a_seed_repeats_its_output(drafter: str) -> None:
    generate = engine(drafter=drafter)
    prompts = torch.tensor([[1, 2, 3, 1, 2]]).expand(ROWS, -1)
    for speculative in (False, True):
        out = generate(prompts, TOKENS, _params(temperature=1.0), 7, speculative)
        assert EngineLayout().audit(EngineInputs(prompts, TOKENS, _params(), generate.vocab_size), out) == []
        assert torch.equal(out, generate(prompts, TOKENS, _params(temperature=1.0), 7, speculative))


def test_greedy_generation_is_the_same_with_speculation_on_and_off() -> None:
    generate = engine()
    prompts = torch.tensor([[4, 0, 2]]).expand(ROWS, -1)
    greedy = _params(temperature=0.0)
    assert torch.equal(generate(prompts, TOKENS, greedy, 0, False), generate(prompts, TOKENS, greedy, 1, True))


def test_the_planted_fault_acts_only_with_speculation_on_and_is_undone_after() -> None:
    transformers = pytest.importorskip("transformers")
    crop = transformers.DynamicCache.crop
    faulty = engine(fault="cache-not-rolled-back")
    prompts = torch.tensor([[1, 2, 3]]).expand(ROWS, -1)
    assert torch.equal(
        faulty(prompts, TOKENS, _params(temperature=1.0), 3, False),
        engine()(prompts, TOKENS, _params(temperature=1.0), 3, False),
    )
    faulty(prompts, TOKENS, _params(temperature=1.0), 3, True)
    assert transformers.DynamicCache.crop is crop
    with pytest.raises(ValueError, match="fault must be one of"):
        engine(fault="no-such-fault")


def test_a_row_ends_at_its_stop_token_in_both_modes_and_not_before_its_minimum() -> None:
    generate = engine()
    rows = 16
    prompts = torch.tensor([[1, 2, 3]]).expand(rows, -1)
    stops = SamplingParams(
        temperature=torch.full((rows,), 1.5, dtype=torch.float64),
        stop_tokens=torch.full((rows,), 0b110, dtype=torch.int64),  # tokens 1 and 2 end a row
        min_tokens=torch.tensor([0, 3] * (rows // 2), dtype=torch.int64),
    )
    for speculative in (False, True):
        out = generate(prompts, 6, stops, 11, speculative)
        assert EngineLayout().audit(EngineInputs(prompts, 6, stops, generate.vocab_size), out) == []
        ended = (out == 1) | (out == 2)
        first = torch.where(ended.any(-1), ended.int().argmax(-1), 6)
        after = torch.arange(6) > first.unsqueeze(-1)
        assert bool((out[after] == -1).all()) and bool((out[~after] >= 0).all())  # -1 exactly after the stop
        assert bool((first[1::2] >= 3).all())  # no stop token before a row's minimum
        assert bool(ended.any())  # the case does stop some rows


def test_positions_advanced_by_drafts_change_generations_with_speculation_on_only() -> None:
    rows = 16
    prompts = torch.tensor([[1, 2, 3, 1]]).expand(rows, -1)
    sampled = SamplingParams(temperature=torch.ones(rows, dtype=torch.float64))
    clean, faulty = engine(), engine(fault="positions-advanced-by-drafts")
    assert torch.equal(faulty(prompts, 6, sampled, 1, False), clean(prompts, 6, sampled, 1, False))
    assert not torch.equal(faulty(prompts, 6, sampled, 1, True), clean(prompts, 6, sampled, 1, True))
    assert not faulty.target.model._forward_pre_hooks  # the hook is gone after the call


def test_tokens_after_stop_are_emitted_with_speculation_on_only() -> None:
    transformers = pytest.importorskip("transformers")
    rows = 32
    prompts = torch.tensor([[1, 2, 3, 1]]).expand(rows, -1)
    stop = SamplingParams(
        temperature=torch.ones(rows, dtype=torch.float64), stop_tokens=torch.full((rows,), 0b1, dtype=torch.int64)
    )
    faulty = engine(fault="tokens-after-stop")
    assisted = transformers.GenerationMixin._assisted_decoding
    for speculative, emitted in ((False, False), (True, True)):
        out = faulty(prompts, 6, stop, 1, speculative)
        stopped = (out == 0).int()
        after = ((stopped.cumsum(-1) - stopped) > 0) & (out >= 0)  # a token after the row's first stop token
        assert bool(after.any()) is emitted
    assert type(faulty.target)._assisted_decoding is assisted and "_assisted_decoding" not in vars(type(faulty.target))
