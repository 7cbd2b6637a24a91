"""Per-row sampling parameters: their edges occur, the warp of every drawn case is a law that
keeps what each edge must keep, and the logits reference emits only what the warp allows."""

from __future__ import annotations

import torch
from hypothesis import Phase, find, given, settings

from specverify import strategies as sv
from specverify._contract import audit_output
from specverify._warps.rules import warp
from specverify.samplers import logits_reference


@given(sv.logits_cases())
def test_each_edge_keeps_what_it_must(case):
    logits, params = case
    law = warp(logits, params)
    assert bool((law >= 0).all()) and torch.allclose(law.sum(-1), torch.ones(law.shape[:-1], dtype=torch.float64))
    argmax = logits.argmax(-1)
    assert bool((law.gather(-1, argmax.unsqueeze(-1)) > 0).all())  # every warp keeps the most probable token
    vocab = logits.shape[-1]
    one_hot = (params.temperature == 0) | (params.top_k == 1) | (params.top_p <= 1 / vocab) | (params.min_p == 1)
    expected = torch.nn.functional.one_hot(argmax, vocab).to(torch.float64)
    assert torch.equal(law[one_hot], expected[one_hot])


@given(sv.logits_cases())
def test_the_logits_reference_emits_only_what_the_warp_allows(case):
    logits, params = case
    batch, positions, vocab = logits.shape
    generator = torch.Generator().manual_seed(0)
    draft = torch.softmax(torch.randn(batch, positions - 1, vocab, generator=generator, dtype=torch.float64), -1)
    drafts = torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, positions - 1)
    output = logits_reference(logits, draft, drafts, generator, params)
    assert audit_output(output, warp(logits, params), drafts) == []


NO_SHRINK = settings(phases=[Phase.generate], database=None, max_examples=2000)


def test_every_edge_is_drawn():
    names = {"temperature": [0.0, 1e-3, 100.0], "top_p": [1e-9], "min_p": [0.999, 1.0]}
    for name, values in names.items():
        for value in values:
            find(
                sv.sampling_params(3, 8),
                lambda p, name=name, value=value: bool((getattr(p, name) == value).any()),
                settings=NO_SHRINK,
            )
    for k in (1, 8, 16):
        find(sv.sampling_params(2, 8, names=("top_k",)), lambda p, k=k: bool((p.top_k == k).any()), settings=NO_SHRINK)
