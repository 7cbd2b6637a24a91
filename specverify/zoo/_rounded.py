"""A zoo member of the class the presets miss (issue 28): a law moved by TV about 1e-3.

Its accept ratio reads the draft probability through a bfloat16 copy made by truncation (the high
16 bits of the float32, as a kernel that packs q by masking does), while the residual uses the
float32 q.  Truncation always rounds down, by up to 2^-7 relative, so drafts are accepted a little
too often: the emitted law moves by a few 1e-4 to 2e-3 in TV, below every preset's reach
(thorough's TV 0.003).  The law given some drafts moves further (where the truncated q(y) falls
below p(y), a draft that should be accepted with probability p/q is always accepted), and
standard's conditional checks find it there; quick does not, and ``--tv 0.001`` is sized for the
emitted law's own move.
"""

from __future__ import annotations

import torch

from ._core import canonical_with
from ._members import member

__all__ = ["bf16_truncated", "first_token_tv"]


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
