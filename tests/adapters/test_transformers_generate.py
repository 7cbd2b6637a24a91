"""transformers' real assisted generation loop, on local models whose logits are the harness's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specverify._kinds import LoopKind
from specverify._loop import MarkovLM, generation_law
from specverify._warps.rules import SamplingParams
from specverify.stats import gof_test

transformers = pytest.importorskip("transformers")

from specverify.adapters.transformers_generate import loop  # noqa: E402


def _chain(seed: int, vocab: int, order: int) -> MarkovLM:
    g = torch.Generator().manual_seed(seed)
    return MarkovLM(torch.randn(vocab**order, vocab, generator=g, dtype=torch.float64) * 1.5, context=(0,) * order)


def test_greedy_generation_is_the_targets_argmax_path_even_when_the_law_needs_two_tokens_back():
    target, draft = _chain(1, 3, 2), _chain(2, 3, 2)
    prompt = torch.tensor([[1, 2], [2, 0]])
    params = SamplingParams(temperature=torch.zeros(2, dtype=torch.float64))
    out = loop()(target, draft, prompt, 5, params, torch.Generator().manual_seed(0))
    for row in range(2):
        path = prompt[row].tolist()
        for _ in range(5):
            path.append(int(target(torch.tensor([path])).argmax()))
        assert out[row].tolist() == path[2:]


def test_sampled_generation_follows_the_warped_target_law():
    target, draft = _chain(3, 4, 1), _chain(4, 4, 1)
    rows, length = 400, 2
    params = SamplingParams(
        temperature=torch.full((rows,), 0.8, dtype=torch.float64),
        top_k=torch.full((rows,), 3, dtype=torch.int64),
        top_p=torch.full((rows,), 0.9, dtype=torch.float64),
    )
    prompt = torch.ones((rows, 1), dtype=torch.int64)
    out = loop()(target, draft, prompt, length, params, torch.Generator().manual_seed(7))
    assert out.shape == (rows, length) and bool(((out >= 0) & (out < 4)).all())
    counts = np.bincount((out[:, 0] * 4 + out[:, 1]).numpy(), minlength=16)
    law = generation_law(target, torch.tensor([1]), length, params.select(slice(0, 1))).numpy()
    assert counts[law == 0].sum() == 0  # never a token the warps cut
    assert gof_test(counts, law, alpha=1e-6).pvalue > 1e-6


def test_the_spec_is_taken_for_a_loop_by_specverify_loop():
    from specverify._calling.sut import SamplerUnderTest

    under_test = SamplerUnderTest("specverify.adapters.transformers_generate:loop", isolation="in-process", kind="loop")
    assert under_test.kind == LoopKind(under_test.parameters)
    assert under_test.parameters[:4] == ("temperature", "top_k", "top_p", "min_p")
    assert "frequency_penalty" not in under_test.parameters and "grammar" in under_test.parameters  # as a processor


def test_the_history_parameters_map_to_the_generation_config():
    from specverify._history.posing import posed_params
    from specverify.adapters.transformers_generate import history_config

    group = {
        "repetition_penalty": 1.5,
        "min_tokens": 2,
        "stop_tokens": 0b101,
        "logit_bias": [0.0, 0.5, -1.0],
        "bad_words": [[2, 2], [0]],
    }
    params = posed_params([group], torch.zeros(1, dtype=torch.int64), tuple(group))
    assert history_config(params, 4) == {
        "repetition_penalty": 1.5,
        "eos_token_id": [0, 2],
        "min_new_tokens": 2,
        "sequence_bias": {(1,): 0.5, (2,): -1.0},
        "bad_words_ids": [[2, 2], [0]],
    }
    assert history_config(SamplingParams(temperature=torch.ones(1, dtype=torch.float64)), 4) == {}
    # a row of a batch whose other rows set them: no bias, no bad words (transformers refuses empty ones)
    off = posed_params([group, {}], torch.ones(1, dtype=torch.int64), tuple(group))
    assert history_config(off, 4) == {"repetition_penalty": 1.0, "sequence_bias": None, "bad_words_ids": None}


def test_history_parameters_give_the_exact_law_and_a_stop_token_ends_the_row():
    from specverify._history import history_generation_law, padded_code
    from specverify._history.posing import posed_params

    target, draft = _chain(5, 3, 1), _chain(6, 3, 1)
    group = {"repetition_penalty": 2.0, "min_tokens": 1, "stop_tokens": 0b001, "bad_words": [[2, 2]]}
    rows, length = 400, 3
    params = posed_params([group], torch.zeros(rows, dtype=torch.int64), tuple(group))
    prompt = torch.ones((rows, 1), dtype=torch.int64)
    out = loop()(target, draft, prompt, length, params, torch.Generator().manual_seed(3))
    law = history_generation_law(target, torch.tensor([1]), length, params.select(slice(0, 1))).numpy()
    counts = np.bincount(padded_code(out, 3).numpy(), minlength=law.size)
    assert bool((out == -1).any())  # some rows ended at the stop token, padded
    assert counts[law == 0].sum() == 0  # no stop token before min_tokens, no bad word, no token after a stop
    assert gof_test(counts, law, alpha=1e-6).pvalue > 1e-6


def test_transformers_matches_bad_words_against_the_prompt_too_a_convention_the_checks_do_not_pose():
    from specverify._history import history_generation_law
    from specverify._history.posing import posed_params

    uniform = MarkovLM(torch.zeros(3, 3, dtype=torch.float64), context=(0,))
    params = posed_params([{"bad_words": [[1, 2]]}], torch.zeros(60, dtype=torch.int64), ("bad_words",))
    out = loop()(uniform, uniform, torch.ones((60, 1), dtype=torch.int64), 1, params, torch.Generator().manual_seed(0))
    assert not bool((out == 2).any())  # 2 after the prompt's 1 is banned: P(no 2 in 60 | 1/3) = 3e-11
    law = history_generation_law(uniform, torch.tensor([1]), 1, params.select(slice(0, 1)))
    assert abs(float(law[2]) - 1 / 3) < 1e-12  # the harness's law (vLLM's) reads the generated tokens only


def test_a_grammar_given_as_a_logits_processor_gives_the_exact_law_with_assisted_generation():
    from specverify._history import history_generation_law, padded_code
    from specverify._history.posing import posed_params

    # the self-repeating target and its drafter favour what the grammar forbids: a token twice in a row
    target, draft = _chain(5, 3, 1), _chain(6, 3, 1)
    group = {"grammar": [[1, 2, 3], [-1, 2, 3], [1, -1, 3], [1, 2, -1]]}
    rows, length = 400, 3
    params = posed_params([group], torch.zeros(rows, dtype=torch.int64), tuple(group))
    prompt = torch.ones((rows, 1), dtype=torch.int64)
    out = loop()(target, draft, prompt, length, params, torch.Generator().manual_seed(4))
    law = history_generation_law(target, torch.tensor([1]), length, params.select(slice(0, 1))).numpy()
    counts = np.bincount(padded_code(out, 3).numpy(), minlength=law.size)
    assert counts[law == 0].sum() == 0  # no token outside the grammar
    assert (law == 0).sum() > 0 and gof_test(counts, law, alpha=1e-6).pvalue > 1e-6
