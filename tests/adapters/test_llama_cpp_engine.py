"""llama.cpp's own generate() (llama-cpp-python) on a tiny GGUF behind the engine contract."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specverify._kinds import EngineInputs, EngineLayout, kind_of
from specverify._warps.rules import SamplingParams

pytest.importorskip("llama_cpp", reason="the llama.cpp engine needs llama-cpp-python (the llama-cpp extra)")
pytest.importorskip("gguf", reason="the llama.cpp engine writes its model with the gguf package (the llama-cpp extra)")

from specverify.adapters.llama_cpp_engine import engine, gbnf  # noqa: E402 - after the skip

ROWS, TOKENS = 8, 6


@pytest.fixture(scope="module")
def generate(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    return engine(directory=tmp_path_factory.mktemp("gguf"))


def _params(**values: float | int) -> SamplingParams:
    return SamplingParams(
        **{
            k: torch.full((ROWS,), v, dtype=torch.int64 if isinstance(v, int) else torch.float64)
            for k, v in values.items()
        }
    )


def _audited(generate, prompts: torch.Tensor, params: SamplingParams, seed: int, speculative: bool) -> torch.Tensor:  # noqa: ANN001
    out = generate(prompts, TOKENS, params, seed, speculative)
    assert EngineLayout().audit(EngineInputs(prompts, TOKENS, params, generate.vocab_size), out) == []
    return out


def test_it_is_declared_an_engine_over_its_vocabulary(generate) -> None:  # noqa: ANN001
    kind = kind_of(generate)
    assert (kind.vocab_size, kind.max_batch) == (6, 64) and "min_tokens" in kind.parameters
    assert Path(generate.path).exists() and "prompt-lookup" in generate.name


def test_both_modes_keep_the_contract_and_a_seed_repeats_its_output(generate) -> None:  # noqa: ANN001
    prompts = torch.tensor([[3, 4, 3, 4]]).expand(ROWS, -1)
    sampled = _params(temperature=1.0)
    for speculative in (False, True):
        out = _audited(generate, prompts, sampled, 7, speculative)
        assert torch.equal(out, _audited(generate, prompts, sampled, 7, speculative))
        assert not torch.equal(out, _audited(generate, prompts, sampled, 8, speculative))
        assert len({tuple(row) for row in out.tolist()}) > 1  # rows are seeded apart


def test_greedy_generation_is_the_same_with_speculation_on_and_off(generate) -> None:  # noqa: ANN001
    prompts = torch.randint(6, (ROWS, 4), generator=torch.Generator().manual_seed(0))
    greedy = _params(temperature=0.0)
    assert torch.equal(_audited(generate, prompts, greedy, 0, False), _audited(generate, prompts, greedy, 1, True))


def test_a_row_ends_at_its_stop_token_and_a_bias_can_forbid_a_token(generate) -> None:  # noqa: ANN001
    prompts = torch.tensor([[3, 4, 5, 3]]).expand(ROWS, -1)
    stop = _params(temperature=1.5, stop_tokens=0b11000)  # tokens 3 and 4 end a row
    banned = SamplingParams(
        temperature=torch.full((ROWS,), 1.5, dtype=torch.float64),
        logit_bias=torch.tensor([0.0] * 5 + [-float("inf")], dtype=torch.float64).expand(ROWS, -1),
    )
    for speculative in (False, True):
        out = _audited(generate, prompts, stop, 3, speculative)
        ended = (out == 3) | (out == 4)
        first = torch.where(ended.any(-1), ended.int().argmax(-1), TOKENS)
        assert bool(ended.any()) and bool(((out == -1) == (torch.arange(TOKENS) > first.unsqueeze(-1))).all())
        assert not bool((_audited(generate, prompts, banned, 3, speculative) == 5).any())


#: After token 3 only token 1; after 0, token 4 or 5; tokens 2 never.
TABLE = [[1, -1, -1, 2, -1, -1], [-1, -1, -1, -1, 0, 0], [-1, 0, -1, -1, -1, -1]]


def test_a_token_automaton_is_a_gbnf_grammar_over_token_ids() -> None:
    assert gbnf(TABLE) == "root ::= s0\ns0 ::= <[0]> s1 | <[3]> s2\ns1 ::= <[4]> s0 | <[5]> s0\ns2 ::= <[1]> s0\n"


def _follows(row: list[int]) -> bool:
    state = 0
    for token in row:  # over a generation's few tokens: walk the automaton
        state = TABLE[state][token]
        if state < 0:
            return False
    return True


def test_every_generation_follows_its_grammar_in_both_modes(generate) -> None:  # noqa: ANN001
    prompts = torch.tensor([[3, 4, 3, 4]]).expand(ROWS, -1)
    grammar = torch.tensor([TABLE, [[0] * 6] * 3] * (ROWS // 2))  # every other row: none
    params = SamplingParams(temperature=torch.full((ROWS,), 1.5, dtype=torch.float64), grammar=grammar)
    for speculative in (False, True):
        out = _audited(generate, prompts, params, 5, speculative)
        assert all(_follows(row) for row in out[0::2].tolist())
        assert not all(_follows(row) for row in out[1::2].tolist())  # the rows without a grammar are free


def test_a_draft_model_drafts_in_place_of_prompt_lookup(tmp_path: Path) -> None:
    drafted = engine(drafter="model", directory=tmp_path)
    assert "generate(model" in drafted.name and len(list(tmp_path.glob("*.gguf"))) == 2  # target and drafter
    prompts = torch.randint(6, (ROWS, 4), generator=torch.Generator().manual_seed(1))
    greedy = _params(temperature=0.0)
    assert torch.equal(_audited(drafted, prompts, greedy, 0, True), _audited(drafted, prompts, greedy, 0, False))
    with pytest.raises(ValueError, match="drafter must be one of"):
        engine(drafter="medusa", directory=tmp_path)
