"""Posing probability cases as logits and parameters: the warp gives back the case's law."""

from __future__ import annotations

import pytest
import torch

import specverify
from specverify._kinds import LogitsLayout
from specverify._kinds.logits_posing import pose
from specverify._warps.rules import DEFAULT_ORDER, warp
from specverify.samplers._logits_reference import logits_reference

ALL = ("temperature", "top_k", "top_p", "min_p")


def _laws(seed: int, batch: int = 48, positions: int = 3, vocab: int = 9) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(batch, positions, vocab, generator=g, dtype=torch.float64) + 0.05
    keep = torch.rand(batch, positions, vocab, generator=g) < torch.linspace(0.2, 1.0, batch)[:, None, None]
    keep[..., 0] = True  # every law keeps a token
    p = p * keep
    p[:6] = torch.nn.functional.one_hot(torch.randint(vocab, (6, positions), generator=g), vocab).double()
    return p / p.sum(-1, keepdim=True)


@pytest.mark.parametrize("order", [DEFAULT_ORDER, ("temperature", "min_p", "top_p", "top_k")])
@pytest.mark.parametrize("parameters", [ALL, ("temperature",), ("top_k",), ("temperature", "top_p"), ("min_p",)])
def test_the_warp_of_the_posed_logits_is_the_case_law(parameters, order):
    p = _laws(1)
    logits, params = pose(p, parameters)
    assert params.given == tuple(n for n in ALL if n in parameters)
    assert torch.allclose(warp(logits, params, order), p, rtol=0, atol=1e-12)


def test_cuts_have_decoys_to_remove_and_one_hot_rows_are_greedy():
    p = _laws(2)
    logits, params = pose(p, ALL)
    decoys = torch.isfinite(logits) & (p == 0)
    assert decoys.any() and (params.top_k > 0).any() and (params.top_p < 1).any() and (params.min_p > 0).any()
    assert (params.temperature == 0).sum() == 3 and bool((params.temperature[[0, 2, 4]] == 0).all())
    no_cuts = pose(p, ("temperature",))[0]
    assert not (torch.isfinite(no_cuts) & (p == 0))[params.temperature > 0].any()  # nothing to cut, no decoy


class _SkipsACut:
    """The logits reference with one declared cut not applied to the target (vLLM #42744's class)."""

    def __init__(self, skipped: str) -> None:
        self.skipped = skipped

    def __call__(self, target_logits, draft_probs, draft_tokens, generator, params):
        return logits_reference(
            target_logits, draft_probs, draft_tokens, generator, params.only(n for n in ALL if n != self.skipped)
        )


SELECT = ["support.zero-target[zeros]", "fit.conditional[zeros]", "contract.one-hot"]


def test_the_logits_reference_passes_the_battery_posed_as_logits():
    result = specverify.check(
        LogitsLayout(ALL).posed(logits_reference),
        budget="quick",
        select=[*SELECT, "fit.step[chain]"],
        isolation="in-process",
    )
    bad = [(c.id, c.status, c.message) for c in result.checks if c.status not in ("pass", "skip")]
    assert not bad


@pytest.mark.parametrize("skipped", ["top_k", "top_p", "min_p", "temperature"])
def test_a_sampler_that_skips_a_warp_is_caught(skipped):
    result = specverify.check(
        LogitsLayout(ALL).posed(_SkipsACut(skipped)), budget="quick", select=SELECT, isolation="in-process"
    )
    assert result.verdict in ("non-conformant", "lossy"), [(c.id, c.status) for c in result.checks]
