"""The warps against a plain scalar statement of the rules, row by row, and at their edges."""

from __future__ import annotations

import math

import pytest
import torch

from specverify._warps.rules import DEFAULT_ORDER, SamplingParams, warp


def scalar_warp(logits: list[float], t: float, k: int, top_p: float, min_p: float, order=DEFAULT_ORDER) -> list[float]:
    """The docstring's rules, one row, in Python floats and sorted lists."""
    vocab = len(logits)
    if t == 0:
        best = max(range(vocab), key=lambda i: (logits[i], -i))
        probs = [1.0 if i == best else 0.0 for i in range(vocab)]
    else:
        m = max(x / t for x in logits)
        e = [math.exp(x / t - m) for x in logits]
        probs = [x / sum(e) for x in e]

    def renorm(keep):
        kept = [p if keep[i] else 0.0 for i, p in enumerate(probs)]
        return [p / sum(kept) for p in kept]

    for name in order:
        if name == "top_k" and 0 < k < vocab:
            kth = sorted(probs, reverse=True)[k - 1]
            probs = renorm([p >= kth for p in probs])
        elif name == "top_p" and top_p < 1:
            ranked = sorted(range(vocab), key=lambda i: (-probs[i], i))
            keep, mass = [False] * vocab, 0.0
            for i in ranked:
                keep[i] = mass < top_p
                mass += probs[i]
            probs = renorm(keep)
        elif name == "min_p" and min_p > 0:
            top = max(probs)
            probs = renorm([p >= min_p * top for p in probs])
    return probs


def params(t, k, p, m) -> SamplingParams:
    return SamplingParams(
        temperature=torch.tensor(t, dtype=torch.float64),
        top_k=torch.tensor(k, dtype=torch.int64),
        top_p=torch.tensor(p, dtype=torch.float64),
        min_p=torch.tensor(m, dtype=torch.float64),
    )


@pytest.mark.parametrize("order", [DEFAULT_ORDER, ("temperature", "min_p", "top_k", "top_p")])
def test_heterogeneous_rows_match_the_scalar_rules(order):
    g = torch.Generator().manual_seed(7)
    rows, vocab = 64, 12
    logits = torch.randn(rows, vocab, generator=g, dtype=torch.float64) * 3
    t = (torch.rand(rows, generator=g, dtype=torch.float64) * 2).tolist()
    t[::7] = [0.0] * len(t[::7])  # greedy rows among the others
    k = torch.randint(0, vocab + 3, (rows,), generator=g).tolist()
    p = (torch.rand(rows, generator=g, dtype=torch.float64) * 0.9 + 0.1).tolist()
    p[::5] = [1.0] * len(p[::5])
    m = (torch.rand(rows, generator=g, dtype=torch.float64) * 0.5).tolist()
    m[::3] = [0.0] * len(m[::3])
    got = warp(logits, params(t, k, p, m), order)
    for r in range(rows):
        want = scalar_warp(logits[r].tolist(), t[r], k[r], p[r], m[r], order)
        assert got[r].tolist() == pytest.approx(want, abs=1e-12), r


def test_parameters_broadcast_over_positions_and_sum_to_one():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, 9, generator=g, dtype=torch.float64)
    warped = warp(logits, params([0.7, 0.0, 1.3], [3, 0, 9], [0.8, 1.0, 0.5], [0.0, 0.2, 0.1]))
    assert torch.allclose(warped.sum(-1), torch.ones(3, 5, dtype=torch.float64))
    for b in range(3):
        one = warp(
            logits[b],
            params([[0.7, 0.0, 1.3][b]] * 5, [[3, 0, 9][b]] * 5, [[0.8, 1.0, 0.5][b]] * 5, [[0.0, 0.2, 0.1][b]] * 5),
        )
        assert torch.equal(warped[b], one)


def test_edges_reduce_to_the_argmax_or_leave_the_law_alone():
    logits = torch.tensor([[0.3, 2.0, -1.0, 1.9, float("-inf")]], dtype=torch.float64)
    argmax = torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    softmax = torch.softmax(logits, dim=-1)

    def one(**kw):
        return SamplingParams(
            **{n: torch.tensor([v], dtype=torch.int64 if n == "top_k" else torch.float64) for n, v in kw.items()}
        )

    assert torch.equal(warp(logits, one(temperature=0.0)), argmax)
    assert torch.equal(warp(logits, one(top_k=1)), argmax)
    assert torch.equal(warp(logits, one(top_p=1e-9)), argmax)
    assert torch.equal(warp(logits, one(min_p=0.999)), argmax)
    for off in (one(top_k=0), one(top_k=5), one(top_k=50), one(top_p=1.0), one(min_p=0.0), one(temperature=1.0)):
        assert torch.allclose(warp(logits, off), softmax, rtol=0, atol=1e-15)
    hot = warp(logits, one(temperature=1e6))
    assert torch.allclose(hot[0, :4], torch.full((4,), 0.25, dtype=torch.float64), atol=1e-5) and hot[0, 4] == 0
    assert warp(logits, one(top_k=2))[0].nonzero().flatten().tolist() == [1, 3]


def test_top_k_keeps_every_token_tied_at_the_boundary():
    logits = torch.tensor([[1.0, 2.0, 1.0, 0.0]], dtype=torch.float64)
    kept = warp(logits, SamplingParams(top_k=torch.tensor([2])))
    assert kept[0].nonzero().flatten().tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": torch.tensor([-1.0], dtype=torch.float64)}, "temperature"),
        ({"top_p": torch.tensor([0.0], dtype=torch.float64)}, "top_p"),
        ({"min_p": torch.tensor([1.5], dtype=torch.float64)}, "min_p"),
        ({"top_k": torch.tensor([1.0])}, "top_k"),
        ({"top_k": torch.tensor([1, 2]), "top_p": torch.tensor([0.5], dtype=torch.float64)}, "disagree"),
    ],
)
def test_invalid_parameters_are_refused_with_their_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


def test_a_sampler_is_given_only_what_it_declares():
    full = params([1.0], [2], [0.9], [0.1])
    assert full.only(("temperature", "top_k")).given == ("temperature", "top_k")
    assert full.select(slice(0, 1)).rows == 1
    with pytest.raises(ValueError, match="order"):
        warp(torch.zeros(1, 3), full, order=("top_k", "top_k"))


def test_a_sorted_cut_from_a_partial_sort_keeps_what_the_full_stable_sort_keeps(monkeypatch):
    # top-p and top-k + top-p of every preset, from topk prefixes that double, against the full sort:
    # ties (rounded logits, a flat half), zeros (-inf logits), peaked and flat rows, top_p tiny and off
    from specverify._warps import prefix, presets
    from specverify._warps.presets import PRESETS

    monkeypatch.setattr(prefix, "FIRST_PREFIX", 2)  # short prefixes: the partial path on small V too
    g = torch.Generator().manual_seed(7)
    for trial in range(120):
        vocab = int(torch.randint(2, 700 if trial % 2 else 12, (1,), generator=g))
        batch = int(torch.randint(1, 24, (1,), generator=g))
        logits = torch.randn(batch, vocab, generator=g, dtype=torch.float64) * float(8 * torch.rand(1, generator=g))
        if trial % 4 == 1:
            logits = torch.round(logits)
        if trial % 4 == 2:
            logits[torch.rand(batch, vocab, generator=g) < 0.5] = -float("inf")
        if trial % 4 == 3:
            logits[:, : vocab // 2] = logits[:, :1]
        probs = torch.softmax(logits, -1)
        top_p = torch.rand(batch, 1, generator=g, dtype=torch.float64)
        top_p[torch.rand(batch, 1, generator=g) < 0.2] = 1.0
        top_p[torch.rand(batch, 1, generator=g) < 0.1] = 1e-9
        top_k = torch.randint(-1, vocab + 3, (batch, 1), generator=g)

        def nucleus(sorted_probs, top_p=top_p):
            return sorted_probs.cumsum(dim=-1) - sorted_probs < top_p

        assert torch.equal(prefix.kept_prefix(probs, nucleus), prefix._full(probs, nucleus))
        for convention in PRESETS.values():
            for values in ({"top_p": top_p}, {"top_k": top_k, "top_p": top_p}):
                kept = convention._sorted_cuts(probs, values)
                with monkeypatch.context() as patched:  # the same cut from the full stable sort
                    patched.setattr(presets, "kept_prefix", lambda probs, keep, **_: prefix._full(probs, keep))
                    assert torch.equal(kept, convention._sorted_cuts(probs, values)), (convention.name, trial)
