"""A tree adapter for Sequoia's layout: successor lists with prefix offsets.

``verify`` below is written in Sequoia's own terms (Infini-AI-Lab/Sequoia ``Tree/SpecTree.py``,
``accept_step`` and ``verify``): one token buffer holding the prefix and then the tree (node ``i`` at
position ``i + offset``, ``offset = len(prefix) - 1``), one coin per position (``r``), the target and
draft laws per tree node, ``Successors`` tried in order; a child is accepted iff
``p[token] > r * q[token]``; on rejection ``p`` becomes the residual ``norm(max(p - q, 0))`` and the
token leaves ``q`` (without replacement; ``remove_rejected=False`` keeps it, SpecInfer's rule, which the
test shows is lossy on children drawn without replacement); at a leaf the bonus comes from ``p``.
Batched over rows with the successor lists as a ``-1`` padded tensor (Sequoia runs one row and
stops early on tokens 0 and 2, which this stand-in does not).  The adapter (``sampler``, at the
bottom) is the part to copy.
"""

from __future__ import annotations

import torch

from specverify import trees

PREFIX = 3  # committed tokens before the tree: node i sits at position i + PREFIX - 1

# --- the verifier, in Sequoia's terms --------------------------------------------------------


def verify(
    tokens: torch.Tensor,  # [B, P - 1 + N] the prefix, then the tree's nodes 1..N-1
    successors: torch.Tensor,  # [B, N, C] each node's children in try order, -1 padded
    target_probs: torch.Tensor,  # [B, N, V] the target law after each tree node
    draft_probs: torch.Tensor,  # [B, N, V] the draft law each node's children were drawn from
    r: torch.Tensor,  # [B, P - 1 + N] one coin per position
    ground_truth_len: int,
    generator: torch.Generator | None = None,
    remove_rejected: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, width, slots = successors.shape
    rows = torch.arange(batch)
    offset = ground_truth_len - 1
    accept_list = torch.full((batch, ground_truth_len + width - 1), -1, dtype=torch.int64)
    accept_list[:, :ground_truth_len] = torch.arange(ground_truth_len)
    parent = torch.zeros(batch, dtype=torch.int64)  # tree node of the last accepted position
    count = torch.full((batch,), ground_truth_len, dtype=torch.int64)
    walking = torch.ones(batch, dtype=torch.bool)
    residual = torch.zeros(batch, target_probs.shape[-1], dtype=target_probs.dtype)
    for _ in range(width):
        p = target_probs[rows, parent] / target_probs[rows, parent].sum(-1, keepdim=True)
        q = draft_probs[rows, parent].clone()
        moved = torch.zeros(batch, dtype=torch.bool)
        for c in range(slots):
            pos = successors[rows, parent, c]
            live = walking & ~moved & (pos >= 0)
            token = tokens[rows, (pos + offset).clamp(0, tokens.shape[1] - 1)]
            qn = q / q.sum(-1, keepdim=True).clamp_min(1e-300)
            accept = live & (p[rows, token] > r[rows, (pos + offset).clamp(0, r.shape[1] - 1)] * qn[rows, token])
            reject = live & ~accept
            rest = (p - qn).clamp_min(0)
            mass = rest.sum(-1, keepdim=True)
            p = torch.where(reject[:, None] & (mass > 0), rest / mass.clamp_min(1e-300), p)
            if remove_rejected:
                q[rows[reject], token[reject]] = 0.0
            accept_list[rows[accept], count[accept]] = pos[accept] + offset
            count += accept.to(torch.int64)
            parent = torch.where(accept, pos, parent)
            moved |= accept
        stopped = walking & ~moved
        residual = torch.where(stopped[:, None], p, residual)  # the residual, or at a leaf the target's p
        walking &= moved
        if not walking.any():
            break
    new_token = residual.multinomial(1, generator=generator).squeeze(1)
    return accept_list, new_token


# --- the adapter -----------------------------------------------------------------------------


def sampler(tree: trees.TreeBatch, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    layout = trees.to_sequoia(tree, prefix_len=PREFIX)
    tokens = layout.sequence()
    r = torch.rand(tokens.shape, generator=generator, dtype=torch.float64)
    assert tree.draft_probs is not None, "the without-replacement rule reads the draft law"
    accept_list, token = verify(tokens, layout.successors, tree.target_probs, tree.draft_probs, r, PREFIX, generator)
    return layout.to_path(accept_list, token)


sampler.algorithm = "without-replacement"  # type: ignore[attr-defined]
sampler.contract = "tree"  # type: ignore[attr-defined]  # specverify.check runs the trees family on it
sampler.name = "Sequoia SpecTree.verify, successor lists (stand-in)"  # type: ignore[attr-defined]
