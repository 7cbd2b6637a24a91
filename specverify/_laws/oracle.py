"""The canonical algorithm's mathematics, owned by the exact law: the oracle every sampler is judged by.

This module depends on nothing else in specverify (torch only), so nothing under test can move the
expected law: the exact law (:mod:`specverify._laws.exact`) and the exact checks import it, and a sampler
(the reference, the zoo, the Triton wrapper) may import it too, never the reverse.  The tests set it
against :class:`fractions.Fraction` enumeration (``tests/test_oracle.py``).

Numerical conventions (the exact law, ``specverify.laws.step_law`` and its kin, uses them too):

* Each probability row is divided by its sum first, so rounded, not-quite-normalised inputs stand
  for the law they approximate.
* Draft ``i`` is accepted iff ``u_i * q_i(y_i) < p_i(y_i)``.  This is ``u_i < p/q`` without the
  division, so a draft with ``p = 0`` is never accepted (``u = 0`` included) and ``q = 0`` needs no
  special case.
* The emitted token after the last acceptance is drawn by inverse CDF from ``[p_j - q_j]_+`` (the
  residual at the rejection position ``j``) or from ``p_K`` (the bonus), using one more uniform.
  Padding ``q`` with a zero row makes the bonus the residual at position ``K``: one code path.
* Residual fallback: if the residual's mass is at float-noise level (at most ``V`` units of float64
  round-off) the rejection itself was a rounding artefact of a ``p`` that equals ``q``, and the token
  is drawn from ``p_j``.  No division by zero, no NaN, and never a token of target probability 0.
"""

from __future__ import annotations

import torch

__all__ = ["accepts", "assemble", "canonical_emit", "emitting_law", "inverse_cdf", "normalise", "residual_distribution"]


def normalise(probs: torch.Tensor) -> torch.Tensor:
    """Divide each row (last axis) by its sum, in float64."""
    probs = probs.to(torch.float64)
    return probs / probs.sum(dim=-1, keepdim=True)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``[p - q]_+`` (unnormalised), or ``p`` where that residual's mass is float noise."""
    residual = (p - q).clamp_min_(0.0)
    noise = p.shape[-1] * torch.finfo(torch.float64).eps
    at_noise = ~(residual.sum(dim=-1) > noise)
    if bool(at_noise.any()):  # rare: a masked copy costs a scan of every row even when it selects none
        residual = torch.where(at_noise.unsqueeze(-1), p, residual)
    return residual


def inverse_cdf(dist: torch.Tensor, u: torch.Tensor, *, cdf: torch.Tensor | None = None) -> torch.Tensor:
    """The smallest token whose cumulative mass exceeds ``u * total``; never a zero-mass token.

    ``cdf``: ``dist.cumsum(dim=-1)`` where the caller has it already (written into a buffer it owns).
    """
    cdf = dist.cumsum(dim=-1) if cdf is None else cdf
    x = (u * cdf[..., -1]).unsqueeze(-1)
    token = torch.searchsorted(cdf, x, right=True).squeeze(-1)
    # u * total can round up to total itself (token == V): take the last token with positive mass.
    overflow = token == dist.shape[-1]
    if overflow.any():
        positions = torch.arange(dist.shape[-1], device=dist.device)
        token[overflow] = torch.where(dist[overflow] > 0, positions, -1).amax(dim=-1)
    return token


def canonical_emit(
    target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor, uniforms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The canonical step as a deterministic function of ``uniforms [B, K+1]``.

    Only the row sums and the emitting row are normalised: the full ``[B, K+1, V]`` tensors are
    read once each (their sums), not copied, and the values are those of :func:`normalise`.
    """
    batch, k = draft_tokens.shape
    p, q = target_probs, draft_probs
    p_sum = p.sum(dim=-1, dtype=torch.float64)
    q_sum = q.sum(dim=-1, dtype=torch.float64)
    accepted = accepts(uniforms[:, :k], draft_tokens, p[:, :k], p_sum[:, :k], q, q_sum)
    num_accepted = accepted.to(torch.int64).cumprod(dim=-1).sum(dim=-1)

    # The bonus is the residual against a zero draft row: one code path for both.  These are the
    # operations of emitting_law and inverse_cdf on two fresh [B, V] rows, in place: each further
    # [B, V] temporary cost as much as the draw at V = 32000 (a fresh page-faulted allocation).
    at = num_accepted.clamp_max(k - 1)
    p_row = _row_at(p, num_accepted).to(torch.float64).div_(p_sum.gather(1, num_accepted.unsqueeze(1)))
    residual = _row_at(q, at).to(torch.float64).div_(q_sum.gather(1, at.unsqueeze(1)))
    residual.mul_((num_accepted < k).unsqueeze(-1)).neg_().add_(p_row).clamp_min_(0.0)  # [p - q]_+
    at_noise = ~(residual.sum(dim=-1) > p.shape[-1] * torch.finfo(torch.float64).eps)
    if bool(at_noise.any()):
        residual = torch.where(at_noise.unsqueeze(-1), p_row, residual)
    last = inverse_cdf(residual, uniforms[:, k], cdf=torch.cumsum(residual, dim=-1, out=p_row))
    return assemble(draft_tokens, num_accepted, last)


def _row_at(x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """``x[b, position[b]]`` for each row ``b`` of ``x [B, N, V]``: ``[B, V]``, one row copied per row
    (by row number into the flattened tensor where ``x`` is contiguous: cheaper than advanced indexing)."""
    batch, n = x.shape[:2]
    if x.is_contiguous():
        flat = torch.arange(batch, device=x.device) * n + position
        return x.reshape(batch * n, *x.shape[2:]).index_select(0, flat)
    return x[torch.arange(batch, device=x.device), position]


def accepts(
    uniforms: torch.Tensor,
    tokens: torch.Tensor,
    p: torch.Tensor,
    p_sum: torch.Tensor,
    q: torch.Tensor,
    q_sum: torch.Tensor,
) -> torch.Tensor:
    """Whether each drafted ``token`` is accepted: ``u * q(y) / sum(q) < p(y) / sum(p)`` in
    float64 (``p``, ``q [..., V]`` as given, ``p_sum``, ``q_sum`` their float64 row sums).  The one
    acceptance rule of :func:`canonical_emit` and of the reference loop's step."""
    index = tokens.unsqueeze(-1)
    p_drafted = p.gather(-1, index).squeeze(-1).to(torch.float64) / p_sum
    q_drafted = q.gather(-1, index).squeeze(-1).to(torch.float64) / q_sum
    return uniforms * q_drafted < p_drafted


def emitting_law(
    p: torch.Tensor,
    p_sum: torch.Tensor,
    q: torch.Tensor | None = None,
    q_sum: torch.Tensor | None = None,
    drafted: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[B, V]``: the law the last token of each row is drawn from, ``[p - q]_+`` of its rows
    normalised by their sums (:func:`residual_distribution`).  Without ``q``, or on rows where
    ``drafted`` is false, the residual against a zero draft row: the bonus, from ``p``."""
    if (q is None) != (q_sum is None):
        raise ValueError("emitting_law takes a draft row with its sum, or neither (the bonus)")
    p_row = p.to(torch.float64) / p_sum.unsqueeze(-1)
    if q is None or q_sum is None:
        return residual_distribution(p_row, torch.zeros_like(p_row))
    q_row = q.to(torch.float64) / q_sum.unsqueeze(-1)
    if drafted is not None:
        q_row *= drafted.unsqueeze(-1)
    return residual_distribution(p_row, q_row)


def assemble(
    draft_tokens: torch.Tensor, num_accepted: torch.Tensor, last: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Contract outputs: the accepted drafts, the last token, ``-1`` padding."""
    batch, k = draft_tokens.shape
    positions = torch.arange(k + 1, device=draft_tokens.device)
    padded = torch.cat([draft_tokens, torch.full_like(draft_tokens[:, :1], -1)], dim=1)
    tokens = torch.where(positions < num_accepted.unsqueeze(-1), padded, -1)
    tokens.scatter_(1, num_accepted.unsqueeze(1), last.unsqueeze(1).to(tokens.dtype))
    return tokens, num_accepted
