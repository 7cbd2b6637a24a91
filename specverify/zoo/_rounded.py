"""Zoo members of the class the presets miss (issue 28): a law moved by TV about 1e-3.

``bf16-truncated-ratio`` (a step sampler): its accept ratio reads the draft probability through a bfloat16 copy made by
truncation (the high 16 bits of the float32, as a kernel that packs q by masking does), while the residual uses the
float32 q.  Truncation always rounds down, by up to 2^-7 relative, so drafts are accepted a little
too often: the emitted law moves by a few 1e-4 to 2e-3 in TV, below every preset's reach
(thorough's TV 0.003).  The law given some drafts moves further (where the truncated q(y) falls
below p(y), a draft that should be accepted with probability p/q is always accepted), and
standard's conditional checks find it there; quick does not, and ``--tv 0.001`` is sized for the
emitted law's own move.

``loop:bf16-prefix-sum-draft`` (a generation loop, :mod:`specverify.zoo._loops`) is the drafter/ratio
mismatch: its drafter draws through a bfloat16 prefix sum of q (:func:`bf16_prefix_sum_law`) while
the verifier is handed the float32 q.  The loop family judges the emitted law only, so only a run
sized for its move (``--tv 0.001``) sees it; :func:`drafted_generation_law` gives its law exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._core import canonical_with
from ._members import member

__all__ = ["bf16_prefix_sum_law", "bf16_truncated", "drafted_generation_law", "first_token_tv"]


def bf16_truncated(x: torch.Tensor) -> torch.Tensor:
    """``x`` as float32 with its low 16 bits cleared (a bfloat16 by truncation), back in float64."""
    bits = x.to(torch.float32).contiguous().view(torch.int32) & ~0xFFFF
    return bits.view(torch.float32).to(torch.float64)


def first_token_tv(p: torch.Tensor, q: torch.Tensor) -> float:
    """The exact TV between the member's first emitted token (one draft, K=1) and the target ``p``:
    accepted ``y`` with mass ``q(y) min(1, p(y)/q~(y))``, the rest from the float32 residual."""
    p, q = p.to(torch.float64), q.to(torch.float64)
    accepted = q * torch.minimum(torch.ones_like(p), p / bf16_truncated(q))
    residual = (p - q).clamp_min(0.0)
    law = accepted + (1.0 - accepted.sum()) * residual / residual.sum()
    return 0.5 * float((law - p).abs().sum())


def bf16_prefix_sum_law(q: torch.Tensor) -> torch.Tensor:
    """The law a draw from ``q [..., V]`` follows when its cumulative sum is kept in bfloat16 (q
    rounded to bfloat16, each partial sum rounded again), as a sampling kernel that scans in the
    model's dtype does; in float64, unnormalised (the last partial sum is the total).  Adding a
    non-negative term never lowers a rounded sum, so the steps are non-negative and a token of
    probability 0 keeps probability 0."""
    partial = q.to(torch.bfloat16).cumsum(dim=-1, dtype=torch.bfloat16).to(torch.float64)
    return torch.diff(partial, dim=-1, prepend=torch.zeros_like(partial[..., :1]))


def drafted_generation_law(
    target: Callable[[torch.Tensor], torch.Tensor],
    draft: Callable[[torch.Tensor], torch.Tensor],
    prompt: torch.Tensor,
    num_tokens: int,
    k: int,
    warp: Callable[[torch.Tensor], torch.Tensor],
    drafter: Callable[[torch.Tensor], torch.Tensor] = lambda q: q,
) -> torch.Tensor:
    """``[V**num_tokens]`` exact law of the first ``num_tokens`` tokens a ``k``-draft speculative
    loop generates after ``prompt [L]`` when its drafter draws from ``drafter(q)`` (normalised) but
    the verifier is handed ``q``: accept ``y`` with ``min(1, p(y)/q(y))``, on a rejection emit from
    normalised ``[p - q]_+``, after ``k`` accepts a bonus from ``p``.  ``warp(logits [1, V])`` gives
    a law (p from ``target``, q from ``draft``).  With the identity drafter it is the target's own
    law (the canonical algorithm is exact); small ``V**num_tokens`` only: it walks every path."""
    vocab = int(target(prompt[None]).shape[-1])
    weights = vocab ** torch.arange(num_tokens - 1, -1, -1)
    law = torch.zeros(vocab**num_tokens, dtype=torch.float64)
    cache: dict[tuple[str, tuple[int, ...]], torch.Tensor] = {}

    def probs(which: str, tokens: tuple[int, ...]) -> torch.Tensor:
        if (which, tokens) not in cache:
            prefix = torch.cat([prompt, torch.tensor(tokens, dtype=prompt.dtype)])[None]
            cache[which, tokens] = warp((target if which == "p" else draft)(prefix))[0].to(torch.float64)
        return cache[which, tokens]

    def position(tokens: tuple[int, ...], drafted: int, mass: float) -> None:
        """``tokens`` generated so far, ``drafted`` of them accepted drafts of this iteration."""
        if len(tokens) == num_tokens:
            law[int((torch.tensor(tokens) * weights).sum())] += mass
            return
        p = probs("p", tokens)
        if drafted == k:  # k accepts: the bonus, then a new iteration
            for t in torch.nonzero(p).flatten().tolist():
                position((*tokens, t), 0, mass * float(p[t]))
            return
        q = probs("q", tokens)
        drawn = drafter(q)
        accepted = drawn / drawn.sum() * torch.where(q > 0, torch.clamp(p / q, max=1.0), 0.0)
        for y in torch.nonzero(accepted).flatten().tolist():
            position((*tokens, y), drafted + 1, mass * float(accepted[y]))
        residual = (p - q).clamp_min(0.0)
        rejected = 1.0 - float(accepted.sum())
        if rejected > 0 and float(residual.sum()) > 0:
            for t in torch.nonzero(residual).flatten().tolist():
                position((*tokens, t), 0, mass * rejected * float(residual[t] / residual.sum()))

    position((), 0, 1.0)
    return law


@member(
    "lossy",
    ("exact", "fit"),
    "standard",
    "The accept ratio reads q(y) from a bfloat16 copy made by truncation (low 16 bits cleared) while "
    "the residual uses the float32 q: drafts are accepted up to 2^-7 (relative) too often. Lossy: the "
    "first emitted token's law moves by TV 6.1e-4 on average (4.4e-4 to 8.7e-4) over 20 random V=64 "
    "rows (softmax of standard normals, seeds 0-19) and 7.8e-4 (up to 2.0e-3) at V=16, computed exactly "
    "by specverify.zoo._rounded.first_token_tv; below every preset's reach (thorough's TV 0.003). The "
    "law given the drafts moves further where the truncated q(y) falls just below p(y) (the draft is "
    "then always accepted): standard finds it there (exact.conditional[all-drafts], fit.conditional[random]; "
    "lossy at seeds 0-2), quick does not (conformant within its reach), and --tv 0.001, sized for the "
    "emitted law's own move, finds it lossy.",
    at_tv=(0.001, "lossy"),
)
def bf16_truncated_ratio(t, d, y, g):
    def accept(u, p_y, q_y):
        return u * bf16_truncated(q_y) < p_y

    return canonical_with(t, d, y, g, accept=accept)
