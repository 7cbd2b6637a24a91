"""Zoo members that differ from the exact law only at float edges (issue 31): conformant, each
with a float-edge finding shown.

Each changes what happens after a draft of probability about 1e-20 (or 5e-13): the law given that
draft moves by TV up to 1, the law the user's requests see by less than 1e-12, far below anything a
test of emitted tokens resolves (``specverify.checks._event``; docs/statistics.md).
"""

from __future__ import annotations

import torch

from .._contract import Capabilities
from .._laws.oracle import canonical_emit
from .._warps.rules import SamplingParams, warp
from ._core import canonical_with, uniforms
from ._members import member

__all__: list[str] = []

_WARPS = ("temperature", "top_k", "top_p", "min_p")
_LOGITS = Capabilities(inputs="logits", params=_WARPS, dtypes=(torch.float64, torch.float32))


def _warped_without_top_p(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    return warp(logits, params.only(n for n in _WARPS if n != "top_p"))


def _rows(values: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """``[B, 1, 1]`` per-row parameter (top_p 1 where none is given)."""
    if values is None:
        return torch.ones((like.shape[0], 1, 1), dtype=torch.float64, device=like.device)
    return values.to(torch.float64).reshape(-1, 1, 1)


def _greedy_fallback(p: torch.Tensor, q: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """The residual ``[p - q]+``; where it is float noise (the harness's rule), the target row's
    most probable token rather than a draw from the row: a difference only after a rejection
    whose residual vanishes."""
    rows = torch.arange(p.shape[0], device=p.device)
    q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
    residual = (p[rows, n] - q_padded[rows, n]).clamp_min(0.0)
    empty = ~(residual.sum(-1) > p.shape[-1] * torch.finfo(torch.float64).eps)
    target = p[rows[empty], n[empty]]
    residual[empty] = torch.zeros_like(target).scatter_(-1, target.argmax(-1, keepdim=True), 1.0)
    return residual


@member(
    "conformant",
    (),
    "quick",
    "transformers' top-p (drop tokens whose ascending cumulative mass is <= 1 - top_p: at top_p 1.0 the sub-ulp tails "
    "stay) and, where the residual is float noise, the target's most probable token instead of a draw from the target "
    "row: float-edge findings only.",
    _LOGITS,
    float_edge=True,
)
def top_p_keeping_sub_ulp_tails(t, d, y, g, params):
    probs = _warped_without_top_p(t, params)
    ascending, order = probs.sort(dim=-1)
    drop_sorted = ascending.cumsum(-1) <= 1.0 - _rows(params.top_p, probs)
    drop = torch.zeros_like(drop_sorted).scatter_(-1, order, drop_sorted)
    kept = torch.where(drop, 0.0, probs)
    return canonical_with(kept / kept.sum(-1, keepdim=True), d, y, g, final=_greedy_fallback)


@member(
    "conformant",
    (),
    "quick",
    "Its own top-p, a token kept iff the mass before it is strictly below top_p, applied at top_p 1.0 too: tokens "
    "after a mass that rounds to 1.0 (sub-ulp tails) are cut, so a sub-ulp draft is always rejected; float-edge "
    "findings only.",
    _LOGITS,
    float_edge=True,
)
def top_p_cutting_sub_ulp_tails(t, d, y, g, params):
    probs = _warped_without_top_p(t, params)
    order = torch.sort(-probs, dim=-1, stable=True).indices
    sorted_probs = probs.gather(-1, order)
    keep_sorted = sorted_probs.cumsum(-1) - sorted_probs < _rows(params.top_p, probs)
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    kept = torch.where(keep, probs, 0.0)
    return canonical_emit(kept / kept.sum(-1, keepdim=True), d, y, uniforms(y.shape[0], y.shape[1], g, t.device))


@member(
    "conformant",
    (),
    "quick",
    "A residual of mass below 1e-12 (not only an exact zero) is taken for float noise and the token drawn from the "
    "target row: above the row's float noise (V * eps) that is a law difference, on a rejection of probability below "
    "1e-12; float-edge findings only.",
    float_edge=True,
)
def target_fallback_below_1e_12(t, d, y, g):
    def final(p, q, n):
        rows = torch.arange(p.shape[0], device=p.device)
        q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
        residual = (p[rows, n] - q_padded[rows, n]).clamp_min(0.0)
        small = residual.sum(-1) < 1e-12
        residual[small] = p[rows[small], n[small]]
        return residual

    return canonical_with(t, d, y, g, final=final)
