"""A tree adapter for EAGLE's layout: leaf-path matrices with per-parent draft rows.

``evaluate_posterior`` below is written in EAGLE-1's own terms (SafeAILab/EAGLE
``eagle/model/utils.py``): the candidates laid out along the leaf paths (``cart_candidates``), the
target's laws along the same paths (``logits[retrieve_indices]``), one draft row per parent
(``op``, indexed by ``p_indices``), the candidates matched by token prefix, each distinct child
tried once, the rejected children's tokens removed from the draft row before it is subtracted from
the residual.  It is the without-replacement rule, batched over rows (EAGLE runs one row); EAGLE-1
itself divides by the candidate's raw draft probability (``eagle1_ratio=True``), which the test shows
is lossy.  The adapter (``sampler``, at the bottom) is the part to copy.
"""

from __future__ import annotations

import torch

from specverify import trees

# --- the verifier, in EAGLE's terms ----------------------------------------------------------


def evaluate_posterior(
    candidates: torch.Tensor,  # [B, L, D+1] tokens along each leaf path, -1 padded
    logits_probs: torch.Tensor,  # [B, L, D+1, V] target law after each path node
    op: torch.Tensor,  # [B, P, V] one draft row per node with children
    p_indices: torch.Tensor,  # [B, L, D+1] the draft row each path node was drawn from
    cart_candidates_prob: torch.Tensor,  # [B, L, D+1] each path node's raw draft probability
    coins: torch.Tensor,  # [B, L, D+1] one coin per path node, used when the node is tried
    eagle1_ratio: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch, leaves, columns = candidates.shape
    rows = torch.arange(batch)
    best = torch.zeros(batch, dtype=torch.int64)  # the leaf row holding the accepted path
    length = torch.zeros(batch, dtype=torch.int64)  # accepted nodes after the root
    walking = torch.ones(batch, dtype=torch.bool)
    sample_p = logits_probs[:, 0, 0] / logits_probs[:, 0, 0].sum(-1, keepdim=True)
    for i in range(1, columns):
        prefix = candidates[rows, best, :i]
        is_eq = (candidates[:, :, :i] == prefix[:, None, :]).all(-1) & walking[:, None]
        gtp = logits_probs[rows, best, i - 1] / logits_probs[rows, best, i - 1].sum(-1, keepdim=True)
        q = op[rows, p_indices[rows, best.clamp_min(0), i].clamp_min(0)]  # the parent's draft row
        tried = torch.zeros_like(gtp, dtype=torch.bool)
        moved = torch.zeros(batch, dtype=torch.bool)
        any_child = torch.zeros(batch, dtype=torch.bool)
        for j in range(leaves):
            x = candidates[:, j, i]
            live = is_eq[:, j] & (x >= 0) & ~moved & ~tried[rows, x.clamp_min(0)]
            any_child |= live
            qk = torch.where(tried, 0.0, q)
            qk = qk / qk.sum(-1, keepdim=True).clamp_min(1e-300)
            qx = cart_candidates_prob[:, j, i] if eagle1_ratio else qk[rows, x.clamp_min(0)]
            accept = live & (coins[:, j, i] * qx < gtp[rows, x.clamp_min(0)])
            reject = live & ~accept
            best = torch.where(accept, j, best)
            moved |= accept
            residual = (gtp - qk).clamp_min(0)
            mass = residual.sum(-1, keepdim=True)
            gtp = torch.where(reject[:, None] & (mass > 0), residual / mass.clamp_min(1e-300), gtp)
            tried[rows[reject], x[reject]] = True
        length += moved.to(torch.int64)
        stopped = walking & ~moved
        sample_p = torch.where((stopped & any_child)[:, None], gtp, sample_p)  # every child rejected: the residual
        leaf = stopped & ~any_child
        bonus = logits_probs[rows, best, i - 1]
        sample_p = torch.where(leaf[:, None], bonus / bonus.sum(-1, keepdim=True), sample_p)  # a leaf: the target
        walking &= moved
    bonus = logits_probs[rows, best, columns - 1]
    sample_p = torch.where(walking[:, None], bonus / bonus.sum(-1, keepdim=True).clamp_min(1e-300), sample_p)
    return best, length, sample_p


# --- the adapter -----------------------------------------------------------------------------


def sampler(tree: trees.TreeBatch, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    layout = trees.to_eagle(tree)
    coins = torch.rand(layout.candidates.shape, generator=generator, dtype=torch.float64)
    best, length, sample_p = evaluate_posterior(
        layout.candidates, layout.target_probs, layout.draft_rows, layout.parent_rows, layout.draft_token_probs, coins
    )
    token = torch.multinomial(sample_p, 1, generator=generator).squeeze(1)
    return layout.to_path(best, length), token


sampler.algorithm = "without-replacement"  # type: ignore[attr-defined]
sampler.contract = "tree"  # type: ignore[attr-defined]  # specverify.check runs the trees family on it
sampler.name = "EAGLE-1 evaluate_posterior, leaf-path layout (stand-in)"  # type: ignore[attr-defined]
