"""Small broken samplers whose runs give the report real failures to render.

Each is the canonical algorithm with one classic bug (see /work/shared/research/bug-catalogue.md),
vectorised, honouring injected uniforms so the exact checks see the bug too.
"""

from __future__ import annotations

import torch

import specverify
from specverify._laws.oracle import inverse_cdf, normalise

__all__ = ["abs_residual", "raises_on_long_drafts", "replacement_from_target"]

_CAPS = {"dtypes": (torch.float64, torch.float32), "uniforms": True}


def _emit(target_probs, draft_probs, draft_tokens, generator, uniforms, residual):
    batch, k = draft_tokens.shape
    if uniforms is None:
        uniforms = torch.rand((batch, k + 1), generator=generator, dtype=torch.float64)
    p, q = normalise(target_probs), normalise(draft_probs)
    index = draft_tokens.unsqueeze(-1)
    accepted = uniforms[:, :k] * q.gather(-1, index).squeeze(-1) < p[:, :k].gather(-1, index).squeeze(-1)
    num_accepted = accepted.to(torch.int64).cumprod(-1).sum(-1)
    rows = torch.arange(batch)
    q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
    last = inverse_cdf(residual(p[rows, num_accepted], q_padded[rows, num_accepted]), uniforms[:, k])
    positions = torch.arange(k + 1)
    padded = torch.cat([draft_tokens, torch.full_like(draft_tokens[:, :1], -1)], dim=1)
    tokens = torch.where(positions < num_accepted.unsqueeze(-1), padded, -1)
    tokens[rows, num_accepted] = last
    return tokens, num_accepted


@specverify.sampler(name="replacement-from-target", **_CAPS)
def replacement_from_target(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Draws the replacement from p instead of the residual [p - q]+: lossy."""
    return _emit(target_probs, draft_probs, draft_tokens, generator, uniforms, lambda p, q: p)


@specverify.sampler(name="abs-residual", **_CAPS)
def abs_residual(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Takes |p - q| for the residual: emits tokens the target gives probability 0."""
    return _emit(target_probs, draft_probs, draft_tokens, generator, uniforms, lambda p, q: (p - q).abs())


@specverify.sampler(name="<script>alert('raises')</script>", **_CAPS)
def raises_on_long_drafts(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Raises on K >= 3 with a message full of markup: exercises fault reporting and escaping."""
    if draft_tokens.shape[1] >= 3:
        raise RuntimeError("<img src=x onerror=alert(1)> K & V too large </script>")
    return _emit(target_probs, draft_probs, draft_tokens, generator, uniforms, lambda p, q: (p - q).clamp_min(0))
