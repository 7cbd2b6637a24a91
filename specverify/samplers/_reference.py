"""The reference exact sampler: the canonical algorithm, vectorised, in float64.

Every row of the batch and every draft position is handled by tensor operations; there is no
Python loop over rows or positions.  It runs on whatever device its inputs are on.

The mathematics (and its numerical conventions) lives in :mod:`specverify._laws.oracle`, which the exact
law owns; this sampler is a thin wrapper that draws the uniforms and calls
:func:`~specverify._laws.oracle.canonical_emit`.  The oracle's functions are re-exported here for callers
that know them by this module.
"""

from __future__ import annotations

import torch

from .._contract import Capabilities
from .._laws.oracle import assemble, canonical_emit, inverse_cdf, normalise, residual_distribution

__all__ = [
    "ReferenceSampler",
    "assemble",
    "canonical_emit",
    "inverse_cdf",
    "normalise",
    "reference",
    "residual_distribution",
]


class ReferenceSampler:
    """The canonical algorithm in float64; accepts injected uniforms."""

    name = "specverify.reference"
    capabilities = Capabilities(
        device=None, dtypes=(torch.float64, torch.float32, torch.bfloat16, torch.float16), uniforms=True
    )

    def __call__(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        uniforms: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, k = draft_tokens.shape
        if uniforms is None:
            uniforms = torch.rand((batch, k + 1), generator=generator, dtype=torch.float64, device=target_probs.device)
        return canonical_emit(target_probs, draft_probs, draft_tokens, uniforms.to(torch.float64))


reference = ReferenceSampler()
