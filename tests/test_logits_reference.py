"""The logits reference: the canonical law of the warped target, and per-row seeds that hold."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from specverify._warps.rules import SamplingParams, warp
from specverify.laws import step_law
from specverify.samplers._logits_reference import logits_reference
from specverify.samplers._uniforms import seeded_uniforms
from specverify.stats import gof_test


def _splitmix_stream(seed: int, count: int) -> list[float]:
    """SplitMix64 in Python integers, as published, for the vectorised version to match."""
    mask = (1 << 64) - 1

    def mix(z: int) -> int:
        z = (z + 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    key = mix(seed & mask)
    return [(mix((key + j * 0x9E3779B97F4A7C15) & mask) >> 11) / 2**53 for j in range(count)]


def test_seeded_uniforms_are_splitmix64_per_row_and_uniform():
    seeds = torch.tensor([0, 1, -5, 2**62 + 3], dtype=torch.int64)
    got = seeded_uniforms(seeds, 6)
    for row, seed in enumerate(seeds.tolist()):
        assert got[row].tolist() == _splitmix_stream(seed, 6)
    assert torch.equal(seeded_uniforms(seeds, 6, offset=2)[:, :4], got[:, 2:])
    many = seeded_uniforms(torch.arange(2000), 50).flatten().numpy()
    assert 0 <= many.min() and many.max() < 1
    assert stats.kstest(many, "uniform").pvalue > 1e-4  # fixed seeds: a deterministic test


def _case(rows: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    k, vocab = 2, 6
    logits = torch.randn(rows, k + 1, vocab, generator=g, dtype=torch.float64) * 2
    draft = torch.softmax(torch.randn(rows, k, vocab, generator=g, dtype=torch.float64), dim=-1)
    tokens = torch.multinomial(draft[0], 1, generator=g).reshape(1, k).expand(rows, k)
    return logits[:1].expand(rows, -1, -1), draft[:1].expand(rows, -1, -1), tokens


@pytest.mark.parametrize(
    "kwargs", [{"temperature": 0.6, "top_k": 3}, {"temperature": 1.4, "top_p": 0.7, "min_p": 0.05}]
)
def test_the_emitted_law_is_the_canonical_law_of_the_warped_target(kwargs):
    rows = 60_000
    logits, draft, tokens = _case(rows, seed=3)
    dtypes = {"top_k": torch.int64}
    params = SamplingParams(
        **{n: torch.full((rows,), v, dtype=dtypes.get(n, torch.float64)) for n, v in kwargs.items()}
    )
    tokens_out, accepted = logits_reference(logits, draft, tokens, torch.Generator().manual_seed(11), params)
    vocab = logits.shape[-1]
    last = tokens_out.gather(1, accepted[:, None])[:, 0]
    counts = np.bincount((accepted * vocab + last).numpy(), minlength=3 * vocab)
    law = step_law(warp(logits[:1], params.select(slice(0, 1))), draft[:1], tokens[:1])[0].reshape(-1).numpy()
    assert gof_test(counts, law, alpha=1e-6).pvalue > 1e-6
    unwarped = step_law(torch.softmax(logits[:1], dim=-1), draft[:1], tokens[:1])[0].reshape(-1).numpy()
    assert gof_test(counts, unwarped, alpha=1e-6).pvalue < 1e-6  # the warp matters: the test has power


def test_a_greedy_row_emits_the_argmax_path():
    logits, draft, tokens = _case(4, seed=5)
    params = SamplingParams(temperature=torch.zeros(4, dtype=torch.float64))
    out, accepted = logits_reference(logits, draft, tokens, torch.Generator().manual_seed(0), params)
    argmax = logits.argmax(-1)
    for row in range(4):
        n = int(accepted[row])
        assert out[row, : n + 1].tolist() == argmax[row, : n + 1].tolist()
        assert n == int((tokens[row] == argmax[row, :2]).long().cumprod(0).sum())


def test_a_seeded_row_depends_on_its_seed_alone():
    logits, draft, tokens = _case(64, seed=9)
    seeds = torch.arange(64, dtype=torch.int64) % 8  # eight requests, each on eight rows
    params = SamplingParams(temperature=torch.ones(64, dtype=torch.float64), seeds=seeds)
    out = logits_reference(logits, draft, tokens, torch.Generator().manual_seed(1), params)[0]
    again = logits_reference(
        logits.flip(0),
        draft.flip(0),
        tokens.flip(0),
        torch.Generator().manual_seed(2),
        params.select(torch.arange(63, -1, -1)),
    )[0]
    assert torch.equal(out, again.flip(0))  # same seed, same output, wherever the row sits
    assert torch.equal(out[0], out[8]) and len({tuple(r) for r in out[:8].tolist()}) > 1
