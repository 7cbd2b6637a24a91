"""The shared core of the zoo: the canonical step in small pieces, so each zoo sampler is a few lines.

A zoo sampler is the canonical algorithm with one piece swapped for what some engine once shipped
(../shared/research/bug-catalogue.md), or for a different but valid choice.  Each declares the
verdict the harness must reach, the family that should catch it and the smallest budget that does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from .._budgets import BUDGETS
from .._contract import Capabilities
from .._laws.oracle import assemble, inverse_cdf, normalise, residual_distribution
from .._record.families import FAMILIES
from .._record.vocabulary import Verdict

__all__ = [
    "ZooSampler",
    "assemble",
    "canonical_with",
    "draft_ratio_terms",
    "final_distribution",
    "first_rejection",
    "uniforms",
]


@dataclasses.dataclass(frozen=True)
class ZooSampler:
    """A sampler with a declared fate.

    Attributes:
        name: the zoo name (also the attribute in :mod:`specverify.zoo`).
        fn: the sampler itself (contract signature).
        verdict: the verdict the harness must reach.
        caught_by: the check families expected to catch it (empty for conformant samplers).
        budget: the smallest budget expected to reach ``verdict``.
        story: what it does wrong (or differently), with the catalogue reference.
        capabilities: what it declares.
        float_edge: whether its run must show a float-edge result (a law difference on an event
            too rare to move the emitted law: ``specverify.checks._event``) beside its verdict.
        at_tv: ``(EPS, verdict)``: a bug below every preset's reach declares the verdict a run sized
            for TV EPS or smaller (``--tv``) must reach (``verdict`` and ``budget`` then hold for the
            presets).
    """

    name: str
    fn: Callable[..., Any]
    verdict: Verdict
    caught_by: tuple[str, ...]
    budget: str
    story: str
    capabilities: Capabilities = Capabilities()
    float_edge: bool = dataclasses.field(default=False, kw_only=True)
    at_tv: tuple[float, str] | None = dataclasses.field(default=None, kw_only=True)

    def __post_init__(self) -> None:  # a misspelt declaration fails at import, not as a silent mismatch
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        if self.at_tv is not None:
            object.__setattr__(self, "at_tv", (float(self.at_tv[0]), Verdict(self.at_tv[1])))
        if self.budget not in BUDGETS:
            raise ValueError(f"zoo member {self.name}: unknown budget {self.budget!r}; known: {tuple(BUDGETS)}")
        unknown = [f for f in self.caught_by if f not in FAMILIES]
        if unknown:
            raise ValueError(f"zoo member {self.name}: caught_by names no family: {unknown}; families: {FAMILIES}")

    def declared_at(self, tv: float) -> tuple[Verdict, str]:
        """The verdict a run sized for ``tv`` must reach, and the budget that declaration is of."""
        if self.at_tv is not None and tv <= self.at_tv[0] * (1 + 1e-9):
            return Verdict(self.at_tv[1]), f"tv<={self.at_tv[0]:g}"
        return self.verdict, self.budget

    def __call__(self, *args, **kwargs):  # the contract's arguments (a logits member's params too)
        return self.fn(*args, **kwargs)


def uniforms(
    batch: int, k: int, generator: torch.Generator | None, device: torch.device, dtype=torch.float64
) -> torch.Tensor:
    """``[B, K+1]`` uniforms from the generator (the last one draws the emitted token)."""
    return torch.rand((batch, k + 1), generator=generator, dtype=dtype, device=device)


def draft_ratio_terms(
    target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor, *, normalised: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(p, q, p(y), q(y))`` in float64; ``normalised=False`` skips the division by row sums."""
    if normalised:
        p, q = normalise(target_probs), normalise(draft_probs)
    else:
        p, q = target_probs.to(torch.float64), draft_probs.to(torch.float64)
    k = draft_tokens.shape[1]
    index = draft_tokens.unsqueeze(-1)
    return p, q, p[:, :k].gather(-1, index).squeeze(-1), q.gather(-1, index).squeeze(-1)


def first_rejection(accepted: torch.Tensor) -> torch.Tensor:
    """``[B]`` accepted prefix length from per-position accept decisions ``[B, K]``."""
    return accepted.to(torch.int64).cumprod(dim=-1).sum(dim=-1)


def final_distribution(p: torch.Tensor, q: torch.Tensor, num_accepted: torch.Tensor) -> torch.Tensor:
    """Residual at the rejection position, or the bonus law: the reference's values, built plainly."""
    rows = torch.arange(p.shape[0], device=p.device)
    q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
    return residual_distribution(p[rows, num_accepted], q_padded[rows, num_accepted])


def canonical_with(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None,
    *,
    accept: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    final: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    draw: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = inverse_cdf,
    u: torch.Tensor | None = None,
    normalised: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The canonical step with any piece replaced.

    ``accept(u_accept, p_y, q_y) -> bool [B, K]``, ``final(p, q, num_accepted) -> dist [B, V]``,
    ``draw(dist, u_last) -> token [B]``.
    """
    batch, k = draft_tokens.shape
    p, q, p_y, q_y = draft_ratio_terms(target_probs, draft_probs, draft_tokens, normalised=normalised)
    if u is None:
        u = uniforms(batch, k, generator, p.device)
    accepted = (accept or (lambda a, py, qy: a * qy < py))(u[:, :k], p_y, q_y)
    num_accepted = first_rejection(accepted)
    dist = (final or final_distribution)(p, q, num_accepted)
    return assemble(draft_tokens, num_accepted, draw(dist, u[:, k]))
