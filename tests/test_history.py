"""The history-dependent parameters as a law: the processors by hand, the exact generation law
against a position-by-position recursion written independently."""

from __future__ import annotations

import itertools

import pytest
import torch

from specverify._history import history_generation_law, history_logits, padded_code, stop_padding_violation
from specverify._kinds import LoopInputs, LoopLayout
from specverify._loop import MarkovLM, generation_law
from specverify._warps.rules import SamplingParams, warp
from specverify.samplers._loop_reference import LoopReference
from specverify.stats import gof_test


def one(**values):
    return SamplingParams(
        **{
            k: torch.tensor([v], dtype=torch.int64 if isinstance(v, int) else torch.float64)
            if not isinstance(v, list)
            else torch.tensor([v], dtype=torch.float64)
            for k, v in values.items()
        }
    )


LOGITS = torch.tensor([[2.0, -1.0, 0.5, 0.0]], dtype=torch.float64)
HISTORY = torch.tensor([[-1, 0, 1, 1, 2]])  # prompt [0, 1] (2 tokens), generated [1, 2]


def test_repetition_divides_positive_and_multiplies_other_seen_logits():
    z = history_logits(LOGITS, HISTORY, 2, one(repetition_penalty=2.0))
    assert z.tolist() == [[1.0, -2.0, 0.25, 0.0]]  # 0 prompt-only counts by default; 3 unseen
    z = history_logits(LOGITS, HISTORY, 2, one(repetition_penalty=2.0, penalty_window=0))
    assert z.tolist() == [[2.0, -2.0, 0.25, 0.0]]  # generated only: token 0 is in the prompt alone


def test_frequency_and_presence_count_generated_tokens_or_the_window():
    z = history_logits(LOGITS, HISTORY, 2, one(frequency_penalty=0.5, presence_penalty=1.0))
    assert z.tolist() == [[2.0, -2.5, -1.0, 0.0]]
    z = history_logits(LOGITS, HISTORY, 2, one(frequency_penalty=0.5, penalty_window=3))  # last 3: 1, 1, 2
    assert z.tolist() == [[2.0, -2.0, 0.0, 0.0]]
    z = history_logits(LOGITS, HISTORY, 2, one(frequency_penalty=0.5, penalty_window=4))  # 0, 1, 1, 2
    assert z.tolist() == [[1.5, -2.0, 0.0, 0.0]]


def test_min_tokens_masks_stop_tokens_until_enough_are_generated_and_bias_adds():
    masked = history_logits(LOGITS, HISTORY, 2, one(min_tokens=3, stop_tokens=0b1001))
    assert masked.tolist() == [[-torch.inf, -1.0, 0.5, -torch.inf]]
    assert torch.equal(history_logits(LOGITS, HISTORY, 2, one(min_tokens=2, stop_tokens=0b1001)), LOGITS)
    biased = history_logits(LOGITS, HISTORY, 2, one(logit_bias=[0.0, 1.0, -torch.inf, 0.0]))
    assert biased.tolist() == [[2.0, 0.0, -torch.inf, 0.0]]


def test_additive_penalties_follow_repetition():
    # vLLM's order: logit 1 seen once, rho 2 then presence 1 gives 1/2 - 1 (SGLang's order would give 0)
    z = history_logits(
        torch.tensor([[1.0, 0.0]]), torch.tensor([[0, 0]]), 1, one(repetition_penalty=2.0, presence_penalty=1.0)
    )
    assert z[0, 0] == -0.5


def _recursive_law(target, prompt, n, params):
    """The law by recursion over prefixes, one sequence at a time (no shared code with the harness's)."""
    vocab = target.vocab_size
    law = torch.zeros((vocab + 1) ** n, dtype=torch.float64)
    stops = int(params.stop_tokens[0]) if params.stop_tokens is not None else 0
    for seq in itertools.product(range(vocab), repeat=n):
        p, out, ended = 1.0, [], False
        for t, token in enumerate(seq):
            if ended:
                if token:
                    p = 0.0
                out.append(-1)
                continue
            prefix = torch.tensor([[*prompt.tolist(), *seq[:t]]])
            probs = warp(history_logits(target(prefix), prefix, len(prompt), params), params)[0]
            p *= float(probs[token])
            out.append(token)
            ended = bool((stops >> token) & 1)
        law[int(padded_code(torch.tensor([out]), vocab))] += p
    return law


@pytest.mark.parametrize(
    "values",
    [
        {"repetition_penalty": 1.7, "temperature": 0.8},
        {"frequency_penalty": 0.9, "presence_penalty": 0.4, "penalty_window": 2},
        {"min_tokens": 2, "stop_tokens": 0b0010, "top_k": 2},
        {"stop_tokens": 0b0101, "logit_bias": [0.5, 0.0, -1.0, 0.3]},
    ],
)
def test_the_exact_generation_law_is_the_recursion(values):
    g = torch.Generator().manual_seed(4)
    target = MarkovLM(torch.randn(16, 4, generator=g, dtype=torch.float64), context=(0, 0))
    prompt = torch.tensor([1, 2, 1])
    law = history_generation_law(target, prompt, 3, one(**values))
    assert torch.allclose(law, _recursive_law(target, prompt, 3, one(**values)), atol=1e-12)
    assert abs(float(law.sum()) - 1) < 1e-12


def test_without_history_parameters_the_law_is_the_memoryless_one():
    target = MarkovLM(torch.randn(4, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64), context=(0,))
    params = one(temperature=0.7)
    padded = history_generation_law(target, torch.tensor([2]), 3, params)
    plain = generation_law(target, torch.tensor([2]), 3, params)
    codes = padded_code(torch.cartesian_prod(*[torch.arange(4)] * 3), 4)
    assert torch.allclose(padded[codes], plain) and abs(float(padded[codes].sum()) - 1) < 1e-12


def test_the_stop_padding_audit():
    stops = torch.tensor([0b10, 0b10])
    assert stop_padding_violation(torch.tensor([[0, 1, -1], [2, 0, 0]]), stops) is None
    assert "after its stop token" in stop_padding_violation(torch.tensor([[0, 1, 2], [2, 0, 0]]), stops)
    assert "before any stop token" in stop_padding_violation(torch.tensor([[0, -1, -1], [2, 0, 0]]), stops)


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="repetition_penalty"):
        one(repetition_penalty=0.0)
    with pytest.raises(ValueError, match="logit_bias"):
        SamplingParams(logit_bias=torch.zeros(3, dtype=torch.float64))


def _reference_counts(values, rows, seed, vocab=3, length=4):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(vocab, vocab, generator=g, dtype=torch.float64) * 0.5 + 2 * torch.eye(vocab, dtype=torch.float64)
    target = MarkovLM(base, context=(0,))
    draft = MarkovLM(base + 0.3 * torch.randn(vocab, vocab, generator=g, dtype=torch.float64), context=(0,))
    params = one(**values).select(torch.zeros(rows, dtype=torch.int64))
    prompt = torch.tensor([0, 0])
    out = LoopReference()(target, draft, prompt.expand(rows, -1), length, params, torch.Generator().manual_seed(seed))
    assert LoopLayout().audit(LoopInputs(target, prompt.expand(rows, -1), length, params), out) == []
    law = history_generation_law(target, prompt, length, params.select(torch.tensor([0])))
    return torch.bincount(padded_code(out, vocab), minlength=law.numel()).numpy(), law.numpy()


@pytest.mark.parametrize(
    "values",
    [
        {"repetition_penalty": 2.0, "frequency_penalty": 0.7},
        {"presence_penalty": 1.0, "penalty_window": 2, "temperature": 0.8},
        {"min_tokens": 3, "stop_tokens": 0b001, "logit_bias": [1.0, 0.0, -0.5]},
    ],
)
def test_the_reference_loop_generates_the_exact_law(values):
    counts, law = _reference_counts(values, 20_000, seed=5)
    assert gof_test(counts, law, alpha=1e-4, random_state=0).pvalue > 1e-4


def test_the_reference_loop_ends_a_row_at_its_stop_token_and_keeps_min_tokens():
    counts, law = _reference_counts({"min_tokens": 2, "stop_tokens": 0b001}, 4000, seed=1)
    codes = torch.nonzero(torch.as_tensor(counts)).squeeze(-1)
    digits = [[(int(c) // 4**p) % 4 for p in (3, 2, 1, 0)] for c in codes]
    assert any(3 in d for d in digits)  # some rows ended early, padded
    assert all(0 not in d[:2] for d in digits)  # never a stop token before 2 are generated
    assert (law[counts > 0] > 0).all()
