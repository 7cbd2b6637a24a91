"""Logits-level samplers through the whole chain battery: each case posed as logits and parameters.

A logits-level sampler takes ``(target_logits [B, K+1, V], draft_probs, draft_tokens, generator,
params)`` and must preserve ``warp(target_logits, params)``.  Every case of the battery names the
law to preserve, ``target_probs``; the logits layout (:class:`specverify._kinds.LogitsLayout`)
calls the sampler as a :class:`PosedSampler`, which poses each row as logits and per-row
parameters whose warp *is* that law (:func:`pose`), so every family (exact, fit, shapes,
efficiency) judges the sampler on its usual expected laws, while the sampler has to get
temperature, top-k, top-p and min-p right to pass:

* temperature ``T`` (drawn per row from a fixed ladder): the logits are ``T log p``;
* tokens of probability 0 become *decoys*: finite logits a nat below the row's smallest, with
  real mass, which the row's ``top_k``, ``top_p`` and ``min_p`` are set to cut exactly (a sampler
  that skips a cut emits decoys: tokens of target probability 0, which the audit of every output
  catches);
* a one-hot row is posed as a greedy row (temperature 0) with its other logits finite.

A row whose smallest probability is too small to place a cut between it and the decoys (a
sub-ulp tail) keeps that cut off.  The parameters follow the row's content and position in the
batch only, so the same inputs always make the same call.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._record.evidence import Warps
from .._warps.declared import DeclaredWarp, declared_warp
from .._warps.posing import pose_for
from .._warps.rules import SamplingParams

__all__ = ["PosedSampler", "pose", "warps_evidence"]

#: Temperatures rows cycle through (by row index): cold, neutral and hot.
TEMPERATURES = (0.6, 1.0, 1.7)
#: Decoys sit this many nats below the smallest kept logit (relative to each position's largest).
DECOY_GAP = 1.0
#: :func:`pose` reads a row's index only modulo 2, 3 and the number of cuts plus one (at most 4): a
#: row's posing depends on its content and its index modulo this.
PERIOD = 12
#: A row's cuts are set only if every kept probability is at least this (float32 cumulative sums
#: then resolve the cut with room to spare).
MIN_SEPARATION = 1e-4


def pose(target_probs: torch.Tensor, parameters: Sequence[str]) -> tuple[torch.Tensor, SamplingParams]:
    """Logits ``[B, K+1, V]`` (float64) and per-row parameters whose warp is ``target_probs`` (each
    row over its sum); only the ``parameters`` named are set."""
    p = target_probs.to(torch.float64)
    p = p / p.sum(dim=-1, keepdim=True)
    batch, _, vocab = p.shape
    support = p > 0
    smallest = torch.where(support, p, torch.inf).amin(dim=-1)  # [B, K+1] smallest kept probability
    sizes = support.sum(-1)
    top_k = sizes.amax(-1)
    exact_k = sizes == top_k.unsqueeze(-1)  # one top_k per row cuts exactly where a position keeps top_k
    row = torch.arange(batch, device=p.device)
    temperature = torch.tensor(TEMPERATURES, dtype=torch.float64, device=p.device)[row % len(TEMPERATURES)]
    greedy = (sizes == 1).all(-1) & (row % 2 == 0) & ("temperature" in parameters)  # half the one-hot rows
    cuts = [name for name in ("top_k", "top_p", "min_p") if name in parameters]
    # a row gets cuts where its kept tokens stand clear of the decoys (no sub-ulp tail)
    separable = (smallest >= MIN_SEPARATION).all(-1) & (sizes < vocab).any(-1) & ~greedy
    # rows take turns, each cut alone, then all together: a sampler that skips any one cut leaves
    # decoys in the rows where that cut was alone
    turn = row % (len(cuts) + 1)
    uses = {name: separable & ((turn == i) | (turn == len(cuts))) for i, name in enumerate(cuts)}
    any_cut = torch.zeros_like(separable)
    for used in uses.values():
        any_cut |= used
    only_top_k = uses.get("top_k", torch.zeros_like(separable)) & ~_uses_another(uses, "top_k", separable)
    where = torch.where(only_top_k[:, None], exact_k, torch.ones_like(exact_k)) & any_cut[:, None]
    finite = ~support & (where | greedy[:, None]).unsqueeze(-1)
    # Decoys: each below its position's smallest kept token and below one min_p for the whole row
    # (DECOY_GAP nats under the row's smallest ratio to a position's largest), and together of the
    # same mass D at every position, so one top_p cuts them all; D <= s_min / 4 keeps that top_p
    # above every kept token, on positions without decoys too.
    largest = p.amax(-1)
    ratio = (smallest / largest).amin(-1, keepdim=True)  # [B, 1]
    cap = largest * ratio * math.exp(-DECOY_GAP)  # [B, K+1] the most one decoy may weigh
    count = finite.sum(-1)
    room = torch.where(count > 0, count * cap, torch.inf).amin(-1)
    mass = torch.minimum(room, 0.25 * smallest.amin(-1))  # [B] D
    decoy = (mass[:, None] / count.clamp_min(1)).log().unsqueeze(-1)
    logits = torch.where(support, torch.where(support, p, 1.0).log(), torch.where(finite, decoy, -torch.inf))
    kept = 1.0 / (1.0 + torch.where(finite.any(-1).any(-1), mass, 0.0))  # [B] the kept share, every position
    top_p = kept * (1.0 - 0.5 * smallest.amin(-1))
    values = {
        "temperature": torch.where(greedy, 0.0, temperature),
        "top_k": torch.where(uses.get("top_k", separable), top_k, 0).to(torch.int64),
        "top_p": torch.where(uses.get("top_p", separable), top_p, 1.0),
        # min_p: between the decoys' ratio to the largest and the smallest kept one's
        "min_p": torch.where(uses.get("min_p", separable), ratio[:, 0] * math.exp(-0.5 * DECOY_GAP), 0.0),
    }
    if "temperature" in parameters:
        logits = logits * torch.where(greedy, 1.0, temperature)[:, None, None]
    return logits, SamplingParams(**{name: value for name, value in values.items() if name in parameters})


def _uses_another(uses: dict[str, torch.Tensor], name: str, like: torch.Tensor) -> torch.Tensor:
    """Rows that use a cut other than ``name``."""
    other = torch.zeros_like(like)
    for key, used in uses.items():
        if key != name:
            other |= used
    return other


class PosedSampler:
    """A logits-level sampler behind the probability contract the battery calls.

    ``parameters`` are the warps the sampler declares it supports.  Each cut the posing sets removes
    exactly the decoys, and no kept token, whichever cut comes first, so one posing serves every
    warp order.
    """

    def __init__(self, sampler: Callable[..., Any], parameters: Sequence[str] = ("temperature",)) -> None:
        self.sampler = sampler
        self.parameters = tuple(parameters)
        self.name = getattr(sampler, "name", None) or getattr(sampler, "__qualname__", type(sampler).__qualname__)
        self.warp = declared_warp(sampler)  # its law: the posing gives each case's law by this warp
        capabilities = getattr(sampler, "capabilities", None)
        if capabilities is not None:
            self.capabilities = capabilities

    def __call__(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: Any,
        *,
        seeds: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> Any:
        """``seeds``: per-request seeds, set as ``params.seeds`` (for a sampler declaring them)."""
        logits, params = pose_for(target_probs, self.parameters, self.warp, pose, period=PERIOD)
        if seeds is not None:
            params = dataclasses.replace(params, seeds=seeds.to(torch.int64))
        # float32 logits for narrower cases: their law is the rounded probabilities', not the
        # logits' own rounding
        dtype = torch.float64 if target_probs.dtype == torch.float64 else torch.float32
        return self.sampler(logits.to(dtype), draft_probs, draft_tokens, generator, params, **kwargs)


#: Largest vocabulary whose laws a failing check's evidence spells out token by token.
EVIDENCE_MAX_VOCAB = 64
_EMITTED = re.compile(r"emitted token (\d+) at position (\d+)")


def warps_evidence(
    example: Any, parameters: Sequence[str], row: int | None = None, message: str = "", warp: DeclaredWarp | None = None
) -> Warps | None:
    """The failing case as the sampler saw it, for the report: the row's parameters and, at each
    position, the law it had to preserve (the warped target) beside the raw target's law (softmax
    of the same logits at temperature 1, no cuts), and the token it emitted where the failure
    names one.  ``None`` for an example that is not one small step case."""
    if isinstance(example, dict) and isinstance(example.get("cases"), list) and example["cases"]:
        example = example["cases"][0]
    if not isinstance(example, dict) or "target_probs" not in example:
        return None
    target = torch.tensor(example["target_probs"], dtype=torch.float64)
    if target.dim() != 2 or target.shape[-1] > EVIDENCE_MAX_VOCAB:
        return None
    row = 0 if row is None or row < 0 else int(row)
    # a row's posing depends on its index; posed by the sampler's declared warp, as it was called
    logits, params = pose_for(target.expand(row + 1, -1, -1), parameters, warp or declared_warp(None), pose)
    found = _EMITTED.search(message)
    return {
        "row": row,
        "params": {name: getattr(params, name)[row].item() for name in params.given},
        "warped": target.div(target.sum(-1, keepdim=True)).tolist(),
        "unwarped": torch.softmax(logits[row], dim=-1).tolist(),
        "emitted": {"token": int(found.group(1)), "position": int(found.group(2))} if found else None,
    }
