"""Reference tree samplers, one per lossless algorithm, vectorised over rows, in float64.

Each follows the tree contract (``specverify._trees.contract``): ``sampler(tree, generator, *, uniforms=None)
-> (path, token)``, declares the ``algorithm`` it implements (the rules are in
``specverify._trees.exact``, whose exact laws they are tested against), and accepts injected
``uniforms [B, N]`` (float64 in ``[0, 1)``), then using no other randomness:

* ``uniforms[:, c]`` (``c >= 1``) is the coin of node ``c`` when it is tried: accepted iff
  ``u * q_k(x) < p_k(x)`` (``q_k`` the point mass on ``x`` for the target-only verifier, so
  ``u < g(x)``); for block verification ``uniforms[:, i]`` is ``eta_i``, kept iff ``eta_i < h_i``;
* ``uniforms[:, 0]`` draws the emitted token by inverse CDF (the smallest token whose cumulative
  mass exceeds ``u`` times the total), as the chain reference does.

A coin of exactly 0 never accepts a token of target probability 0 (the comparisons are strict).
The loops run over depth and sibling rank (at most ``D * R`` steps), never over rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from .._contract import Capabilities
from .._laws.oracle import inverse_cdf, normalise
from .._trees.contract import TreeBatch
from .._trees.exact import _block_thresholds, drafts_normalised, judged_against, residual, without

__all__ = [
    "TREE_REFERENCES",
    "BlockVerificationSampler",
    "TreeReferenceSampler",
    "Walk",
    "block_verification",
    "tree_reference",
    "tree_specinfer",
    "tree_target_only",
    "tree_without_replacement",
    "walk",
]

_CAPABILITIES = Capabilities(dtypes=(torch.float64, torch.float32, torch.bfloat16, torch.float16), uniforms=True)


def _uniforms(tree: TreeBatch, generator: torch.Generator | None, uniforms: torch.Tensor | None) -> torch.Tensor:
    if uniforms is None:
        return torch.rand(tree.parents.shape, generator=generator, dtype=torch.float64, device=tree.target_probs.device)
    if uniforms.shape != tree.parents.shape:
        raise ValueError(
            f"uniforms has shape {tuple(uniforms.shape)}, expected {tuple(tree.parents.shape)} (one per node)"
        )
    return uniforms.to(torch.float64)


class TreeReferenceSampler:
    """SpecInfer, the without-replacement verifier or the target-only verifier on any trees."""

    capabilities = _CAPABILITIES
    contract = "tree"

    def __init__(self, algorithm: str) -> None:
        if algorithm not in ("specinfer", "without-replacement", "target-only"):
            raise ValueError(f"TreeReferenceSampler has no algorithm {algorithm!r}")
        self.algorithm = algorithm
        self.name = f"specverify.tree_{algorithm.replace('-', '_')}"

    def __call__(
        self, tree: TreeBatch, generator: torch.Generator | None = None, *, uniforms: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.algorithm != "target-only" and tree.draft_probs is None:
            raise ValueError(f"{self.name} needs draft_probs")
        return walk(tree, generator, uniforms, self.algorithm)


@dataclasses.dataclass
class Walk:
    """One row-batch's state at the current node: its law ``p``, draft law ``q``, the law it
    arrived with ``p0`` and the mass of the siblings tried so far, counted with multiplicity."""

    p: torch.Tensor
    q: torch.Tensor
    p0: torch.Tensor
    tried: torch.Tensor


def walk(
    tree: TreeBatch,
    generator: torch.Generator | None,
    uniforms: torch.Tensor | None,
    algorithm: str,
    *,
    accepts: Callable[[Walk, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    judged_token: Callable[[TreeBatch, torch.Tensor, torch.Tensor, int], torch.Tensor] | None = None,
    law_after: Callable[[TreeBatch, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    final: Callable[[Walk], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference walk down a tree: from the root, the children of the current node are tried in
    order, each accepted iff ``u * q_k(x) < p_k(x)`` (the residual taken on a rejection, and for
    ``without-replacement`` the draft without ``x``), until a node accepts none; then the token.

    Its pieces are replaceable, so a zoo member is this walk with one piece wrong: ``accepts(state,
    u, x, p_x, q_x)`` (the coin's rule), the token a child is judged on, the law after moving to a
    node, the final law.
    """
    u = _uniforms(tree, generator, uniforms)
    batch, device = tree.batch, tree.parents.device
    rows = torch.arange(batch, device=device)
    children = tree.children
    current = torch.zeros(batch, dtype=torch.int64, device=device)
    path = torch.full((batch, tree.depth + 1), -1, dtype=torch.int64, device=device)
    path[:, 0] = 0
    active = torch.ones(batch, dtype=torch.bool, device=device)
    p = normalise(tree.target_probs[:, 0])
    q = drafts_normalised(tree.draft_probs[:, 0]) if tree.draft_probs is not None else torch.zeros_like(p)
    # p and q are updated in place, on the rows that change (a new [B, V] at each try cost more than the walk)
    state = Walk(p, q, p.clone(), torch.zeros(batch, dtype=torch.float64, device=device))
    law_after = law_after or (lambda t, r, node: normalise(t.target_probs[r, node]))
    for depth in range(tree.depth):
        moved = torch.zeros_like(active)
        for rank in range(children.shape[2]):  # siblings in try order
            child = children[rows, current, rank]
            trying = active & ~moved & (child >= 0)
            if not trying.any():
                break
            child = child.clamp_min(0)
            x = tree.tokens[rows, child].clamp_min(0)  # rows not trying read the root's token, which may be -1
            judged = x if judged_token is None else judged_token(tree, current, child, rank).clamp_min(0)
            p_x = state.p.gather(1, judged[:, None]).squeeze(1)
            # the point mass of target-only is 1 at the judged token
            q_x = torch.ones_like(p_x) if algorithm == "target-only" else state.q.gather(1, judged[:, None]).squeeze(1)
            coin = u[rows, child]
            accept = trying & (coin * q_x < p_x if accepts is None else accepts(state, coin, x, p_x, q_x))
            reject = trying & ~accept
            if accepts is not None:  # the mass of the siblings tried, for a rule that reads it
                state.tried = torch.where(reject, state.tried + state.p0.gather(1, x[:, None]).squeeze(1), state.tried)
            on = reject.nonzero().squeeze(1)
            if on.numel():  # the residual of the rejected rows only; each row's law is its own
                state.p[on] = residual(state.p[on], judged_against(algorithm, state.q[on], judged[on]))
                if algorithm == "without-replacement":
                    state.q[on] = without(state.q[on], x[on])
            moved |= accept
            current = torch.where(accept, child, current)
        active &= moved
        if not active.any():
            break
        path[:, depth + 1] = torch.where(moved, current, -1)
        on = moved.nonzero().squeeze(1)  # the rows that moved: their laws are the new node's
        arrived = law_after(tree, rows[on], current[on])
        state.p[on] = arrived
        state.p0[on] = arrived
        state.tried = torch.where(moved, 0.0, state.tried)
        if tree.draft_probs is not None:
            state.q[on] = drafts_normalised(tree.draft_probs[rows[on], current[on]])
    return path, inverse_cdf(state.p if final is None else final(state), u[:, 0])


class BlockVerificationSampler:
    """Block verification (Sun et al. 2024) on chains given as path trees (``TreeBatch.from_chain``)."""

    algorithm = "block-verification"
    name = "specverify.block_verification"
    capabilities = _CAPABILITIES
    contract = "tree"

    def __call__(
        self, tree: TreeBatch, generator: torch.Generator | None = None, *, uniforms: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not tree.is_chain or not bool((tree.num_nodes == tree.width).all()) or tree.draft_probs is None:
            raise ValueError("block verification needs full path trees with draft_probs (TreeBatch.from_chain)")
        u = _uniforms(tree, generator, uniforms)
        k = tree.width - 1
        p = normalise(tree.target_probs)
        q = drafts_normalised(tree.draft_probs)
        h, weight = _block_thresholds(p, q, tree.tokens[:, 1:])
        kept = u[:, 1:] < h  # [B, K]: eta_i < h_i
        positions = torch.arange(1, k + 1, device=p.device)
        tau = torch.where(kept, positions, 0).amax(dim=1)  # the largest such i, or 0
        rows = torch.arange(tree.batch, device=p.device)
        p_tau = p[rows, tau]
        q_tau = torch.where((tau < k)[:, None], q[rows, tau], 0.0)
        r = (weight[rows, tau][:, None] * p_tau - q_tau).clamp_min(0.0)
        has_mass = r.sum(dim=1, keepdim=True) > p.shape[-1] * torch.finfo(torch.float64).eps
        token = inverse_cdf(torch.where(has_mass, r, p_tau), u[:, 0])
        steps = torch.arange(k + 1, device=p.device)
        path = torch.where(steps <= tau[:, None], steps, -1).expand(tree.batch, k + 1).contiguous()
        return path, token


tree_specinfer = TreeReferenceSampler("specinfer")
tree_without_replacement = TreeReferenceSampler("without-replacement")
tree_target_only = TreeReferenceSampler("target-only")
block_verification = BlockVerificationSampler()
#: The tree reference: SpecInfer's multi-step speculative sampling, the token-wise rule on every node.
tree_reference = tree_specinfer

#: The reference sampler of each algorithm in ``specverify._trees.contract.ALGORITHMS``.
TREE_REFERENCES = {
    s.algorithm: s for s in (tree_specinfer, tree_without_replacement, tree_target_only, block_verification)
}
