"""The engine contract's pieces: its declaration, the kind it is read as, the output audit, and the
tables the two-sample tests compare (each position's token given the tokens before it, and the lengths)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specverify import engine
from specverify._kinds import EngineInputs, EngineKind, EngineLayout, kind_of
from specverify._warps.rules import SamplingParams
from specverify.checks._engine import length_counts, position_tables
from specverify.errors import SamplerSpecError


def audit_generations(tokens, rows: int, num_tokens: int, vocab: int) -> list[str]:  # noqa: ANN001
    prompts = torch.zeros(rows, 1, dtype=torch.int64)
    inputs = EngineInputs(prompts, num_tokens, SamplingParams(), vocab)
    return [v.message for v in EngineLayout().audit(inputs, tokens)]


def test_engine_declares_its_contract_and_parameters() -> None:
    @engine(vocab_size=7, parameters=("temperature", "top_k"), name="mine", max_batch=32)
    def generate(prompts, num_tokens, params, seed, speculative):
        return prompts

    assert (generate.contract, generate.parameters, generate.name) == ("engine", ("temperature", "top_k"), "mine")
    assert kind_of(generate) == EngineKind(("temperature", "top_k"), 7, 32)
    with pytest.raises(ValueError, match="unknown sampling parameters"):
        engine(vocab_size=7, parameters=("beam_width",))
    generate.vocab_size = None
    with pytest.raises(SamplerSpecError, match="declares no vocab_size"):
        kind_of(generate)


def test_the_audit_names_what_breaks_the_contract() -> None:
    good = torch.tensor([[1, 2, -1], [0, 0, 0]])
    assert audit_generations(good, 2, 3, vocab=3) == []
    assert "not a tensor" in audit_generations([[1, 2, 3]], 1, 3, vocab=4)[0]
    assert "expected int64 (2, 4)" in audit_generations(good, 2, 4, vocab=3)[0]
    assert "outside [0, 3)" in audit_generations(torch.tensor([[1, 3, 0]]), 1, 3, vocab=3)[0]
    resumed = audit_generations(torch.tensor([[1, -1, 2]]), 1, 3, vocab=3)
    assert resumed == ["row 0 holds token 2 at position 2, after it ended (-1)"]


def test_position_tables_count_each_token_given_its_prefix() -> None:
    a = np.array([[0, 1], [0, 1], [0, 0], [1, -1]])
    b = np.array([[0, 1], [1, 0], [1, -1], [1, -1]])
    first, second = position_tables(a, b, vocab=2)
    # position 0: one group (the empty prefix); cells: token 0, token 1, ended
    assert first[0].tolist() == [[3, 1, 0]] and first[1].tolist() == [[1, 3, 0]]
    # position 1: groups are the running prefixes either arm reached, (0,) and (1,)
    assert second[0].tolist() == [[1, 2, 0], [0, 0, 1]]
    assert second[1].tolist() == [[0, 1, 0], [1, 0, 2]]


def test_rows_that_ended_leave_the_later_positions() -> None:
    a = np.array([[-1, -1, -1], [1, -1, -1]])
    tables = position_tables(a, a, vocab=2)
    assert tables[0][0].tolist() == [[0, 1, 1]]
    assert tables[1][0].tolist() == [[0, 0, 1]]  # only the row still running after token 1
    assert tables[2][0].shape == (0, 3)  # no row runs past two positions
    assert length_counts(a).tolist() == [1, 1, 0, 0]


def test_the_plan_times_a_generation_over_the_rows_the_engine_was_given() -> None:
    """An engine of ``max_batch`` 4 is timed on 4 rows a mode: its seconds a generation are its own
    (at least the 1 ms each row sleeps), not spread over rows it never ran."""
    import time

    @engine(vocab_size=3, max_batch=4)
    def slow(prompts, num_tokens, params, seed, speculative):
        time.sleep(1e-3 * prompts.shape[0])
        return torch.zeros(prompts.shape[0], num_tokens, dtype=torch.int64)

    seconds, said = kind_of(slow).seconds_per_row(slow)
    assert seconds is not None and seconds >= 1e-3
    assert said.startswith("timed: one call of 4 generations in each mode")
