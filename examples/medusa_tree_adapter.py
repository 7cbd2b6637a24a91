"""A tree adapter for Medusa's layout: candidate buffers and leaf-path candidates.

``evaluate_posterior`` below is written in Medusa's own terms (FasterDecoding/Medusa
``medusa/model/utils.py``): the candidates along the leaf paths (``cart_candidates``, padded with
token 0), the target's laws along the same paths (``logits[retrieve_indices]``, here as
probabilities), ``retrieve_indices`` to tell a padding 0 from a candidate 0, and nodes numbered by
depth then by the heads' top-k rank.  Medusa's own rule, typical acceptance (``typical=(0.09, 0.3)``:
accept ``x`` iff ``p(x) > min(eps, delta * exp(-H(p)))``), is lossy by design; the rule below is the
lossless target-only one (accept a child with probability ``g(x)``, else zero it and renormalise,
the renormalisation kept as one running mass), which suits heads whose candidates are a
deterministic top-k.  The adapter (``sampler``, at the bottom) is the part to copy.
"""

from __future__ import annotations

import torch

from specverify import trees

# --- the verifier, in Medusa's terms ---------------------------------------------------------


def evaluate_posterior(
    posterior_prob: torch.Tensor,  # [B, L, D+1, V] target law after each path node
    candidates: torch.Tensor,  # [B, L, D+1] tokens along each leaf path, 0 padded
    retrieve_indices: torch.Tensor,  # [B, L, D+1] node of each path position, -1 padded
    coins: torch.Tensor,  # [B, N] one coin per node, used when the node is tried
    typical: tuple[float, float] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch, leaves, columns = candidates.shape
    rows = torch.arange(batch)
    best = torch.zeros(batch, dtype=torch.int64)
    length = torch.zeros(batch, dtype=torch.int64)
    walking = torch.ones(batch, dtype=torch.bool)
    sample_p = posterior_prob[:, 0, 0] / posterior_prob[:, 0, 0].sum(-1, keepdim=True)
    for i in range(1, columns):
        prefix = retrieve_indices[rows, best, :i]
        on_path = (retrieve_indices[:, :, :i] == prefix[:, None, :]).all(-1) & (retrieve_indices[:, :, i] >= 0)
        node = torch.where(on_path, retrieve_indices[:, :, i], torch.iinfo(torch.int64).max)
        by_rank = node.argsort(dim=1, stable=True)  # children in node order: the heads' top-k rank
        g = posterior_prob[rows, best, i - 1] / posterior_prob[rows, best, i - 1].sum(-1, keepdim=True)
        if typical is not None:
            eps, delta = typical
            entropy = -(g * torch.log(g + 1e-5)).sum(-1)
            threshold = torch.minimum(torch.full_like(entropy, eps), delta * torch.exp(-entropy))
        kept = torch.ones(batch, dtype=g.dtype)  # the mass of g not yet rejected
        tried = torch.zeros_like(g, dtype=torch.bool)
        moved = torch.zeros(batch, dtype=torch.bool)
        tried_any = torch.zeros(batch, dtype=torch.bool)
        previous = torch.full((batch,), -1, dtype=torch.int64)
        for k in range(leaves):
            j = by_rank[:, k]
            n = retrieve_indices[rows, j, i]
            x = candidates[rows, j, i]
            live = walking & ~moved & on_path[rows, j] & (n != previous)
            previous = torch.where(live, n, previous)
            tried_any |= live
            gx = torch.where(tried[rows, x], 0.0, g[rows, x])  # a rejected token keeps probability 0
            if typical is None:
                accept = live & (coins[rows, n.clamp_min(0)] * kept < gx)  # probability g(x) / kept
            else:
                accept = live & (g[rows, x] > threshold)
            reject = live & ~accept & (kept - gx > 0)  # no mass left: the law stays as it was
            best = torch.where(accept, j, best)
            moved |= accept
            kept = torch.where(reject, kept - gx, kept)
            tried[rows[reject], x[reject]] = True
        g = torch.where(tried, 0.0, g) / kept[:, None]
        length += moved.to(torch.int64)
        stopped = walking & ~moved
        bonus = posterior_prob[rows, best, i - 1] / posterior_prob[rows, best, i - 1].sum(-1, keepdim=True)
        sample_p = torch.where((stopped & tried_any)[:, None], g, sample_p)  # every child rejected: the residual
        sample_p = torch.where((stopped & ~tried_any)[:, None], bonus, sample_p)  # a leaf: the target
        walking &= moved
    bonus = posterior_prob[rows, best, columns - 1]
    sample_p = torch.where(walking[:, None], bonus / bonus.sum(-1, keepdim=True).clamp_min(1e-300), sample_p)
    return best, length, sample_p


# --- the adapter -----------------------------------------------------------------------------


def sampler(tree: trees.TreeBatch, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    layout = trees.to_medusa(tree)
    coins = torch.rand(tree.parents.shape, generator=generator, dtype=torch.float64)
    retrieve_indices = layout.buffers()["retrieve_indices"]
    best, length, sample_p = evaluate_posterior(layout.target_probs, layout.candidates, retrieve_indices, coins)
    token = torch.multinomial(sample_p, 1, generator=generator).squeeze(1)
    return layout.to_path(best, length), token


sampler.algorithm = "target-only"  # type: ignore[attr-defined]
sampler.contract = "tree"  # type: ignore[attr-defined]  # specverify.check runs the trees family on it
sampler.name = "Medusa evaluate_posterior, candidate buffers, target-only rule (stand-in)"  # type: ignore[attr-defined]
