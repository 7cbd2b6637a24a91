"""Zoo members at production shapes (issue 14): bugs the small cases never reach.

Each is caught by the ``shapes`` family only: the other families stay at V <= 8, K <= 4.
"""

from __future__ import annotations

import torch

from .._laws.oracle import inverse_cdf
from ..samplers._reference import reference
from ._core import assemble, canonical_with, draft_ratio_terms, final_distribution, first_rejection, uniforms
from ._members import member, replacement_from_target

__all__: list[str] = []


def _large_vocab_only(min_vocab: int, bug, t, d, y, g):
    """``bug`` where the vocabulary has at least ``min_vocab`` tokens, the reference elsewhere."""
    return bug(t, d, y, g) if t.shape[-1] >= min_vocab else reference(t, d, y, g)


@member(
    "lossy",
    ("shapes",),
    "quick",
    "A vocabulary-size dispatch: from 9 tokens on, a second code path draws the replacement from the target p instead "
    "of the residual [p - q]+.",
)
def wrong_from_nine_tokens(t, d, y, g):
    return _large_vocab_only(9, replacement_from_target, t, d, y, g)


@member(
    "lossy",
    ("shapes",),
    "quick",
    "Vocabulary tiled in blocks of 32,768 with a floor where a ceiling belongs: the last partial tile is never sampled "
    "(V > 32,768 only).",
)
def last_tile_dropped(t, d, y, g):
    def final(p, q, n):
        dist = final_distribution(p, q, n)
        vocab = dist.shape[-1]
        covered = (vocab // 32_768) * 32_768
        if vocab > 32_768 and covered < vocab:
            kept = dist.clone()
            kept[:, covered:] = 0.0
            dist = torch.where(kept.sum(-1, keepdim=True) > 0, kept, dist)
        return dist

    return canonical_with(t, d, y, g, final=final)


@member(
    "lossy",
    ("shapes",),
    "quick",
    "The emitted token's id passes through a 15-bit field (an int16 index masked to stay positive): ids >= 32,768 come "
    "back as id - 32,768.",
)
def int16_index_overflow(t, d, y, g):
    tokens, n = reference(t, d, y, g)
    rows = torch.arange(tokens.shape[0])
    last = tokens[rows, n]
    tokens[rows, n] = torch.where(last >= 32_768, last % 32_768, last)
    return tokens, n


@member(
    "lossy",
    ("shapes",),
    "quick",
    "Per-position accept ratios kept in a fixed array of 8 slots: for K > 8, position i reads slot i mod 8.",
)
def fixed_position_arrays(t, d, y, g):
    batch, k = y.shape
    if k <= 8:
        return reference(t, d, y, g)
    p, q, p_y, q_y = draft_ratio_terms(t, d, y)
    slot = torch.arange(k) % 8
    u = uniforms(batch, k, g, t.device)
    n = first_rejection(u[:, :k] * q_y[:, slot] < p_y[:, slot])
    return assemble(y, n, inverse_cdf(final_distribution(p, q, n), u[:, k]))


@member(
    "lossy",
    ("shapes",),
    "quick",
    "The large-vocabulary path (V > 4,096) launches at most 256 row blocks: rows beyond read the uniforms of block "
    "255.",
)
def grid_limit_large_batch(t, d, y, g):
    batch, k = y.shape
    u = uniforms(batch, k, g, t.device)
    if t.shape[-1] > 4_096 and batch > 256:
        u[256:] = u[255]
    return canonical_with(t, d, y, g, u=u)


@member(
    "lossy",
    ("shapes",),
    "quick",
    "The accept ratio reads p and q at a draft id held in an int16: ids >= 32,768 wrap negative and are read modulo V, "
    "at another token.",
)
def draft_id_through_int16(t, d, y, g):
    wrapped = y.to(torch.int16).to(torch.int64) % t.shape[-1]
    _, _, p_y, q_y = draft_ratio_terms(t, d, wrapped)
    return canonical_with(t, d, y, g, accept=lambda u, _p, _q: u * q_y < p_y)


@member(
    "lossy",
    ("shapes",),
    "quick",
    "Long drafts (K >= 12) take a second kernel whose bonus token, after every draft is accepted, is drawn from the "
    "target row of the last draft (K - 1) instead of the bonus row K.",
)
def bonus_from_last_draft_row_at_long_k(t, d, y, g):
    if y.shape[1] < 12:
        return reference(t, d, y, g)

    def final(p, q, n):
        dist = final_distribution(p, q, n)
        bonus = (n == q.shape[1]).nonzero()[:, 0]
        dist[bonus] = p[bonus, q.shape[1] - 1]
        return dist

    return canonical_with(t, d, y, g, final=final)


def _zero_residual_fallback(fallback):
    def final(p, q, n):
        rows = torch.arange(p.shape[0], device=p.device)
        q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
        residual = (p[rows, n] - q_padded[rows, n]).clamp_min(0.0)
        empty = ~(residual.sum(-1) > p.shape[-1] * torch.finfo(torch.float64).eps)
        residual[empty] = fallback(residual[empty])
        return residual

    return final


@member(
    "non-conformant",
    ("shapes",),
    "quick",
    "vLLM-style argmax over an all-zero residual: a rejection whose residual rounds to zero emits token 0, which the "
    "target may forbid.",
)
def zero_residual_token_zero(t, d, y, g):
    def one_hot_zero(r):
        out = torch.zeros_like(r)
        out[:, 0] = 1.0
        return out

    return canonical_with(t, d, y, g, final=_zero_residual_fallback(one_hot_zero))


@member(
    "non-conformant",
    ("shapes",),
    "quick",
    "A residual that rounds to zero falls back to a uniform draw over the whole vocabulary, forbidden tokens included.",
)
def zero_residual_uniform(t, d, y, g):
    return canonical_with(t, d, y, g, final=_zero_residual_fallback(torch.ones_like))


@member(
    "conformant",
    (),
    "quick",
    "A residual that rounds to zero falls back to the target row of the next position (an off-by-one in the fallback's "
    "row index) instead of the rejection's own. The fallback runs only where the residual is float noise (mass <= V * "
    "eps), so the rejection it follows has probability below that mass: the law given the sub-ulp draft moves by TV "
    "0.3-0.6, the emitted law by less than 1e-12. A float-edge finding, not a lossy sampler (issue 31).",
    float_edge=True,
)
def zero_residual_next_row(t, d, y, g):
    def next_row(p, q, n):
        rows = torch.arange(p.shape[0], device=p.device)
        q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
        residual = (p[rows, n] - q_padded[rows, n]).clamp_min(0.0)
        empty = ~(residual.sum(-1) > p.shape[-1] * torch.finfo(torch.float64).eps)
        residual[empty] = p[rows[empty], (n[empty] + 1).clamp(max=p.shape[1] - 1)]
        return residual

    return canonical_with(t, d, y, g, final=next_row)
