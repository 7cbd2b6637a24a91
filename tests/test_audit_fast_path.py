"""The audit's fast path (``specverify._contract._clean``) passes exactly the outputs the rules pass
one by one: for any output of the contract's shapes, clean or broken in any way, the audit says
the same with it as without it."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specverify import _contract
from specverify._contract import audit_output


@st.composite
def _step_and_output(draw):
    batch, k, vocab = draw(st.integers(1, 6)), draw(st.integers(0, 3)), draw(st.integers(2, 5))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    target = torch.rand(batch, k + 1, vocab, generator=gen)
    target[torch.rand(batch, k + 1, vocab, generator=gen) < draw(st.sampled_from([0.0, 0.3]))] = 0.0
    drafts = torch.randint(0, vocab, (batch, k), generator=gen)
    accepted = torch.randint(0, k + 1, (batch,), generator=gen)
    tokens = torch.full((batch, k + 1), -1, dtype=torch.int64)
    for row in range(batch):  # a clean output: accepted drafts, one token of the sampler's own, padding
        n = int(accepted[row])
        tokens[row, :n] = drafts[row, :n]
        tokens[row, n] = int(torch.randint(0, vocab, (1,), generator=gen))
    for _ in range(draw(st.integers(0, 2))):  # then broken anywhere, into anything
        if draw(st.booleans()):
            row, position = draw(st.integers(0, batch - 1)), draw(st.integers(0, k))
            tokens[row, position] = draw(st.sampled_from([-2, -1, 0, 1, vocab - 1, vocab]))
        else:
            accepted[draw(st.integers(0, batch - 1))] = draw(st.integers(-1, k + 1))
    return (tokens, accepted), target, drafts


@settings(max_examples=400, deadline=None, derandomize=True)
@given(_step_and_output())
def test_the_fast_path_passes_what_the_rules_pass(case):
    output, target, drafts = case
    fast = audit_output(output, target, drafts)
    kept = _contract._clean
    _contract._clean = lambda *_: False  # the rules one by one
    try:
        slow = audit_output(output, target, drafts)
    finally:
        _contract._clean = kept
    assert fast == slow
    tokens, accepted = output
    assert _contract._clean(tokens, accepted, target, drafts) == (slow == [])  # and it takes every clean output
