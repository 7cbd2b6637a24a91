"""The exact uniform-driven check fails on a mismatch: its alarm is the typed ``Outcome.mismatch``."""

from __future__ import annotations

import torch

import specverify
from specverify._budgets import get_budget
from specverify._calling.sut import SamplerUnderTest
from specverify.checks import Context
from specverify.checks._exact import UniformGridCheck


@specverify.sampler(name="flipped-last-uniform", dtypes=(torch.float64,), uniforms=True)
def flipped(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Lossless, but the emitted token reads its uniform backwards: not the canonical output."""
    uniforms = uniforms.clone()
    uniforms[:, -1] = 1.0 - uniforms[:, -1]
    return specverify.reference(target_probs, draft_probs, draft_tokens, generator, uniforms=uniforms)


def run(sampler):
    ctx = Context(
        sut=SamplerUnderTest(sampler), budget=get_budget("quick").with_(validity_examples=8), seed=0, alpha=0.0
    )
    return UniformGridCheck("random").run(ctx)


def test_a_mismatch_on_injected_uniforms_fails_as_non_canonical():
    result = run(flipped)
    assert (result.status, result.finding) == ("fail", "non-canonical")
    assert result.evidence["mismatch"] is True
    first = result.evidence["first_mismatch"]
    assert first["got"] != first["expected"] and first["mismatched_volume"] > 0


def test_the_reference_passes_the_same_check():
    result = run(specverify.reference)
    assert result.status == "pass" and "mismatch" not in result.evidence
