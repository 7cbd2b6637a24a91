"""The generation-loop contract: the harness's models, the exact law, and the reference loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specverify._laws.oracle import canonical_emit, inverse_cdf
from specverify._loop import MarkovLM, generation_law, left_padded
from specverify._warps.declared import resolve_warp
from specverify._warps.rules import SamplingParams, warp
from specverify.samplers._loop_reference import LoopReference
from specverify.stats import gof_test


def test_left_padding_moves_each_row_to_the_right_end():
    rows = torch.tensor([[1, 2, 3, -1], [4, -1, -1, -1], [5, 6, 7, 8]])
    assert left_padded(rows, torch.tensor([3, 1, 4])).tolist() == [[-1, 1, 2, 3], [-1, -1, -1, 4], [5, 6, 7, 8]]


def test_a_markov_model_reads_the_last_tokens_and_its_context():
    vocab = 3
    logits = torch.arange(9 * vocab, dtype=torch.float64).reshape(9, vocab)
    lm = MarkovLM(logits, context=(2, 1))
    prefix = torch.tensor([[-1, -1], [-1, 0], [2, 0]])
    # codes: (2, 1) from context; (1, 0) = context's last then 0; (2, 0)
    assert lm(prefix).tolist() == logits[[2 * 3 + 1, 1 * 3 + 0, 2 * 3 + 0]].tolist()
    with pytest.raises(ValueError, match="context"):
        MarkovLM(logits, context=(1,))


def test_the_exact_law_is_the_product_of_warped_conditionals():
    g = torch.Generator().manual_seed(0)
    lm = MarkovLM(torch.randn(3, 3, generator=g, dtype=torch.float64), context=(1,))
    params = SamplingParams(temperature=torch.tensor([0.7], dtype=torch.float64), top_k=torch.tensor([2]))
    law = generation_law(lm, torch.tensor([0]), 3, params)
    assert law.sum().item() == pytest.approx(1.0, abs=1e-12)
    first = warp(lm(torch.tensor([[0]])), params)[0]
    second = warp(lm(torch.tensor([[0, 2]])), params)[0]
    third = warp(lm(torch.tensor([[0, 2, 1]])), params)[0]
    assert law[2 * 9 + 1 * 3 + 0].item() == pytest.approx((first[2] * second[1] * third[0]).item(), rel=1e-12)


def _models(seed: int, vocab: int = 4):
    g = torch.Generator().manual_seed(seed)
    target = MarkovLM(torch.randn(vocab, vocab, generator=g, dtype=torch.float64) * 1.5, context=(0,))
    draft = MarkovLM(torch.randn(vocab, vocab, generator=g, dtype=torch.float64) * 1.5, context=(0,))
    return target, draft


@pytest.mark.parametrize("k", [1, 3])
def test_the_reference_loop_follows_the_warped_autoregressive_law(k):
    target, draft = _models(1)
    groups = [dict(temperature=1.0), dict(temperature=0.5, top_p=0.8), dict(temperature=1.3, top_k=2, min_p=0.05)]
    per_group, length, vocab = 20_000, 3, 4
    rows = per_group * len(groups)
    which = torch.arange(rows) % len(groups)

    def column(name, dtype, off):
        return torch.tensor([g.get(name, off) for g in groups], dtype=dtype)[which]

    params = SamplingParams(
        temperature=column("temperature", torch.float64, 1.0),
        top_k=column("top_k", torch.int64, 0),
        top_p=column("top_p", torch.float64, 1.0),
        min_p=column("min_p", torch.float64, 0.0),
    )
    prompt = torch.tensor([[2, 1]]).expand(rows, -1)
    out = LoopReference(k=k)(target, draft, prompt, length, params, torch.Generator().manual_seed(5))
    assert out.shape == (rows, length) and bool(((out >= 0) & (out < vocab)).all())
    code = (out * torch.tensor([vocab**2, vocab, 1])).sum(-1)
    for g in range(len(groups)):
        counts = np.bincount(code[which == g].numpy(), minlength=vocab**length)
        law = generation_law(target, torch.tensor([2, 1]), length, params.select(torch.tensor([g])))
        assert gof_test(counts, law.numpy(), alpha=1e-6).pvalue > 1e-6, groups[g]
        plain = generation_law(draft, torch.tensor([2, 1]), length, params.select(torch.tensor([g])))
        assert gof_test(counts, plain.numpy(), alpha=1e-6).pvalue < 1e-6  # the test has power


def test_a_step_emits_the_canonical_steps_tokens_for_the_same_coins_and_shows_models_only_the_rows_still_verifying():
    target, draft = _models(4)
    seen: dict[str, list[int]] = {"target": [], "draft": []}

    def recorded(name, model):
        def call(prefix):
            seen[name].append(prefix.shape[0])
            return model(prefix)

        return call

    k, rows = 3, 4_000
    which = torch.arange(rows) % 3
    params = SamplingParams(
        temperature=torch.tensor([1.0, 0.6, 1.4], dtype=torch.float64)[which],
        top_k=torch.tensor([0, 2, 3])[which],
        top_p=torch.tensor([1.0, 0.9, 0.7], dtype=torch.float64)[which],
    )
    history = torch.randint(4, (rows, 2), generator=torch.Generator().manual_seed(1))
    coins = torch.rand((rows, 2 * k + 1), generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    loop = LoopReference(k=k)
    tokens, accepted, _ = loop.step(recorded("target", target), recorded("draft", draft), history, params, coins)

    # every draft first, then the canonical step on them (the textbook order)
    law = resolve_warp(None)
    prefix, drafts, p, q = history, [], [], []
    for i in range(k + 1):
        p.append(law(target(prefix), params))
        if i < k:
            q.append(law(draft(prefix), params))
            drafts.append(inverse_cdf(q[-1], coins[:, i]))
            prefix = torch.cat([prefix, drafts[-1][:, None]], dim=1)
    want_tokens, want_accepted = canonical_emit(
        torch.stack(p, 1), torch.stack(q, 1), torch.stack(drafts, 1), coins[:, k:]
    )
    assert torch.equal(tokens, want_tokens) and torch.equal(accepted, want_accepted)
    assert 0 < int((accepted == 0).sum()) and 0 < int((accepted == k).sum())  # rejections and bonuses both
    # position i is verified for the rows that accepted the i drafts before it, and only for them
    assert seen["target"] == [int((want_accepted >= i).sum()) for i in range(k + 1)]
    assert seen["draft"] == seen["target"][:k]


def test_a_greedy_row_generates_the_argmax_path():
    target, draft = _models(2)
    params = SamplingParams(temperature=torch.zeros(3, dtype=torch.float64))
    out = LoopReference(k=2)(target, draft, torch.tensor([[1], [2], [3]]), 6, params, torch.Generator().manual_seed(0))
    for row, start in enumerate((1, 2, 3)):
        path, last = [], start
        for _ in range(6):
            last = int(target(torch.tensor([[last]])).argmax())
            path.append(last)
        assert out[row].tolist() == path


def test_per_request_seeds_hold_whatever_the_batch():
    target, draft = _models(3)
    seeds = torch.tensor([11, 12, 11, 13, 14, 15, 16, 17], dtype=torch.int64)
    params = SamplingParams(temperature=torch.ones(8, dtype=torch.float64), seeds=seeds)
    prompt = torch.zeros((8, 1), dtype=torch.int64)
    loop = LoopReference(k=3)
    out = loop(target, draft, prompt, 12, params, torch.Generator().manual_seed(0))
    assert torch.equal(out[0], out[2])  # same seed, same output
    assert len({tuple(r) for r in out[[0, 1, 3, 4, 5, 6, 7]].tolist()}) == 7  # different seeds differ
    alone = loop(target, draft, prompt[:1], 12, params.select(slice(3, 4)), torch.Generator().manual_seed(9))
    assert torch.equal(alone[0], out[3])  # a row's output ignores the rest of the batch
