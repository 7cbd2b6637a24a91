"""The zoo's tree samplers: a tree verifier with one piece wrong, as engines shipped it.

Each member is the reference walk (``specverify.samplers._tree_reference.walk``) with one piece swapped,
declares the algorithm it claims, the verdict the ``trees`` family must reach, and the smallest
budget that reaches it; the story cites the engine issue (../shared/research/trees-logits-rng.md).
They are listed in :data:`TREE_MEMBERS`, next to the step members, and ``specverify zoo`` runs them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .._contract import Capabilities
from .._laws.oracle import inverse_cdf, normalise
from .._record.vocabulary import Verdict
from .._trees.contract import TreeBatch
from .._trees.exact import drafts_normalised, residual, without
from ..samplers._tree_reference import BlockVerificationSampler, Walk, _uniforms, walk
from ._core import ZooSampler

__all__ = ["TREE_MEMBERS", "TreeZooSampler"]

_CAPS = Capabilities(dtypes=(torch.float64, torch.float32), uniforms=True)


@dataclasses.dataclass(frozen=True)
class TreeZooSampler(ZooSampler):
    """A zoo member of the tree contract: ``algorithm`` is what it claims to implement."""

    algorithm: str | None = None
    contract = "tree"


# --- the members ------------------------------------------------------------------------------


def coin_zero_accepts_zero_mass(tree, generator=None, *, uniforms=None):
    # accept iff u <= g(x): a coin of exactly 0 accepts a child of target probability 0
    return walk(tree, generator, uniforms, "target-only", accepts=lambda state, u, x, p_x, q_x: u * q_x <= p_x)


def residual_from_parent_node(tree, generator=None, *, uniforms=None):
    # the logits row of the node's parent read for the node (an off-by-one slice)
    def law_after(t: TreeBatch, rows: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
        return normalise(t.target_probs[rows, t.parents[rows, node].clamp_min(0)])

    return walk(tree, generator, uniforms, "specinfer", law_after=law_after)


def siblings_past_32_wrap(tree, generator=None, *, uniforms=None):
    # a 5-bit sibling index: the 33rd sibling on is judged on the token of sibling (rank mod 32)
    def judged(t: TreeBatch, parent: torch.Tensor, child: torch.Tensor, rank: int) -> torch.Tensor:
        if rank < 32:
            return t.tokens.gather(1, child[:, None]).squeeze(1)
        rows = torch.arange(t.batch, device=t.parents.device)
        wrapped = t.children[rows, parent, rank % 32].clamp_min(0)
        return t.tokens[rows, wrapped]

    return walk(tree, generator, uniforms, "specinfer", judged_token=judged)


def duplicate_siblings_counted_twice(tree, generator=None, *, uniforms=None):
    # accept x_k with p(x_k) / (1 - mass of the siblings tried so far), a duplicate's mass counted again
    def accepts(state: Walk, u: torch.Tensor, x: torch.Tensor, p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
        remaining = (1.0 - state.tried).clamp_min(1e-12)
        return u < (state.p0.gather(1, x[:, None]).squeeze(1) / remaining).clamp(0.0, 1.0)

    return walk(tree, generator, uniforms, "target-only", accepts=accepts)


def threshold_below_one(tree, generator=None, *, uniforms=None):
    # SGLang's threshold_single = threshold_acc = 0.5: accept when g(x) >= 0.5, else with prob. 2 g(x)
    def accepts(state: Walk, u: torch.Tensor, x: torch.Tensor, p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
        return u < torch.where(p_x >= 0.5, 1.0, (p_x / 0.5).clamp(max=1.0))

    return walk(tree, generator, uniforms, "target-only", accepts=accepts)


def no_token_after_a_leaf(tree, generator=None, *, uniforms=None):
    # the bonus token drawn only while a child is left to try: a path that reached a leaf emits -1
    path, token = walk(tree, generator, uniforms, "specinfer")
    last = path.gather(1, ((path >= 0).sum(dim=1, keepdim=True) - 1)).squeeze(1)
    at_leaf = (tree.children[torch.arange(tree.batch, device=path.device), last, 0] < 0) & (last > 0)
    return path, torch.where(at_leaf, -1, token)


def without_replacement_dedupes_siblings(tree, generator=None, *, uniforms=None):
    """The without-replacement walk, a sibling whose token an earlier sibling already holds skipped
    (no rejection step): the reference's law on every tree whose siblings are distinct, another on
    duplicate siblings, which a without-replacement drafter never produces."""
    u = _uniforms(tree, generator, uniforms)
    batch, device = tree.batch, tree.parents.device
    rows = torch.arange(batch, device=device)
    current = torch.zeros(batch, dtype=torch.int64, device=device)
    path = torch.full((batch, tree.depth + 1), -1, dtype=torch.int64, device=device)
    path[:, 0] = 0
    p, q = normalise(tree.target_probs[:, 0]), drafts_normalised(tree.draft_probs[:, 0])
    active = torch.ones(batch, dtype=torch.bool, device=device)
    for depth in range(tree.depth):
        moved = torch.zeros_like(active)
        tried = torch.zeros_like(p, dtype=torch.bool)
        for node in range(1, tree.width):  # children in try order (node order)
            x = tree.tokens[:, node].clamp_min(0)
            trying = (
                active & ~moved & (tree.parents[:, node] == current) & ~tried.gather(1, x[:, None]).squeeze(1)
            )  # the bug: ~tried
            accept = trying & (u[:, node] * q.gather(1, x[:, None]).squeeze(1) < p.gather(1, x[:, None]).squeeze(1))
            reject = (trying & ~accept)[:, None]
            p, q = torch.where(reject, residual(p, q), p), torch.where(reject, without(q, x), q)
            tried |= torch.nn.functional.one_hot(x, p.shape[1]).bool() & trying[:, None]
            moved |= accept
            current = torch.where(accept, node, current)
        active &= moved
        if not active.any():
            break
        path[:, depth + 1] = torch.where(moved, current, -1)
        p = torch.where(moved[:, None], normalise(tree.target_probs[rows, current]), p)
        q = torch.where(moved[:, None], drafts_normalised(tree.draft_probs[rows, current]), q)
    return path, inverse_cdf(p, u[:, 0])


def prefix_matching_target_only(tree, generator=None, *, uniforms=None):
    """Target-only verification over token prefixes: after accepting token x, the children of every
    sibling holding x (with the same target row: the same context) are tried, so a duplicate
    sibling's subtree is tried too.  Lossless (each token is drawn from the target's law given the
    prefix, whatever the candidates), and it accepts more than the target-only walk."""
    u = _uniforms(tree, generator, uniforms)
    batch, n, device = tree.batch, tree.width, tree.parents.device
    rows = torch.arange(batch, device=device)
    group = torch.zeros(batch, n, dtype=torch.bool, device=device)
    group[:, 0] = True
    current = torch.zeros(batch, dtype=torch.int64, device=device)
    p = normalise(tree.target_probs[:, 0])
    active = torch.ones(batch, dtype=torch.bool, device=device)
    for _ in range(tree.depth):
        candidates = group.gather(1, tree.parents.clamp_min(0)) & (tree.parents >= 0)
        moved = torch.zeros_like(active)
        for node in range(1, n):  # every candidate of the group, in node order
            trying = active & ~moved & candidates[:, node]
            if not trying.any():
                continue
            x = tree.tokens[:, node].clamp_min(0)
            p_x = p.gather(1, x[:, None]).squeeze(1)
            accept = trying & (u[:, node] < p_x)
            p = torch.where(
                (trying & ~accept)[:, None],
                normalise((p - torch.nn.functional.one_hot(x, p.shape[1]) * p_x[:, None]).clamp_min(0.0)),
                p,
            )
            moved |= accept
            current = torch.where(accept, node, current)
        active &= moved
        if not active.any():
            break
        row = tree.target_probs[rows, current]
        same = (
            candidates
            & (tree.tokens == tree.tokens[rows, current][:, None])
            & (tree.target_probs == row[:, None]).all(-1)
        )
        group = torch.where(moved[:, None], same, group)
        p = torch.where(moved[:, None], normalise(row), p)
    path = torch.full((batch, tree.depth + 1), -1, dtype=torch.int64, device=device)
    depth = tree.node_depth[rows, current]
    node = current
    for level in range(tree.depth, -1, -1):  # the accepted path, from its last node up through its parents
        at = depth == level
        path[:, level] = torch.where(at, node, path[:, level])
        node = torch.where(at & (level > 0), tree.parents[rows, node].clamp_min(0), node)
        depth = torch.where(at, depth - 1, depth)
    return path, inverse_cdf(p, u[:, 0])


class _TokenWiseResidual(BlockVerificationSampler):
    """Block verification's stopping rule with the token-wise residual norm([p - q]_+)."""

    def __call__(self, tree, generator=None, *, uniforms=None):
        from .._trees.exact import _block_thresholds

        u = _uniforms(tree, generator, uniforms)
        k = tree.width - 1
        p = normalise(tree.target_probs)
        q = drafts_normalised(tree.draft_probs)
        h, _ = _block_thresholds(p, q, tree.tokens[:, 1:])
        positions = torch.arange(1, k + 1, device=p.device)
        tau = torch.where(u[:, 1:] < h, positions, 0).amax(dim=1)
        rows = torch.arange(tree.batch, device=p.device)
        p_tau = p[rows, tau]
        q_tau = torch.where((tau < k)[:, None], q[rows, tau], 0.0)
        r = (p_tau - q_tau).clamp_min(0.0)  # the bug: w_tau dropped
        token = inverse_cdf(torch.where(r.sum(1, keepdim=True) > 0, r, p_tau), u[:, 0])
        steps = torch.arange(k + 1, device=p.device)
        return torch.where(steps <= tau[:, None], steps, -1).expand(tree.batch, k + 1).contiguous(), token


def _member(name: str, fn: Any, algorithm: str, verdict: str, budget: str, story: str) -> TreeZooSampler:
    caught_by = () if Verdict(verdict).lossless else ("trees",)  # a lossless member: no family may fail it
    return TreeZooSampler(name, fn, Verdict(verdict), caught_by, budget, story, _CAPS, algorithm)


#: name -> tree member, in declaration order.
TREE_MEMBERS: dict[str, TreeZooSampler] = {
    m.name: m
    for m in (
        _member(
            "tree-coin-zero-accepts-zero-mass",
            coin_zero_accepts_zero_mass,
            "target-only",
            "non-conformant",
            "quick",
            "Target-only tree verifier accepting on u <= g(x): a coin of exactly 0 accepts a child of target "
            "probability 0 (SGLang #35771).",
        ),
        _member(
            "tree-residual-from-parent-node",
            residual_from_parent_node,
            "specinfer",
            "non-conformant",
            "quick",
            "SpecInfer tree verifier that reads the parent's logits row for the node it descended to, so its residual "
            "and bonus come from the wrong node (a wrong logits slice, TensorRT-LLM PR #15098): it emits tokens the "
            "target gives probability 0 after the path, and its law is wrong wherever it is not.",
        ),
        _member(
            "tree-siblings-past-32-wrap",
            siblings_past_32_wrap,
            "specinfer",
            "lossy",
            "quick",
            "SpecInfer tree verifier with a 5-bit sibling index: from the 33rd sibling on, the acceptance ratio is "
            "read at the token of sibling (rank mod 32), so trees of more than 32 siblings get the wrong law (the "
            ">32-sibling out-of-bounds class).",
        ),
        _member(
            "tree-duplicate-siblings-counted-twice",
            duplicate_siblings_counted_twice,
            "target-only",
            "lossy",
            "quick",
            "Target-only tree verifier that divides by 1 - (mass of the siblings tried so far), counting a duplicate "
            "sibling's mass twice, so a duplicate is accepted after its twin was rejected (SGLang's accumulated-mass "
            "kernel).",
        ),
        _member(
            "tree-threshold-below-one",
            threshold_below_one,
            "target-only",
            "lossy",
            "quick",
            "SGLang's target-only verifier with threshold_single = threshold_acc = 0.5: accepts more than the target's "
            "law allows, lossy by design.",
        ),
        _member(
            "tree-no-token-after-a-leaf",
            no_token_after_a_leaf,
            "specinfer",
            "non-conformant",
            "quick",
            "SpecInfer tree verifier that draws the bonus token only while the accepted node has children left to try: "
            "a path that reaches a leaf emits no token (-1), its own contract violation (no-token), not a token out of "
            "range.",
        ),
        _member(
            "tree-without-replacement-breaks-on-duplicates",
            without_replacement_dedupes_siblings,
            "without-replacement",
            "conformant",
            "quick",
            "Without-replacement tree verifier that skips a sibling holding a token an earlier sibling holds (no "
            "rejection step for it): its law differs from the algorithm's only on duplicate siblings, trees its "
            "drafter cannot produce, so no law check poses them; trees.robustness[duplicates] audits them (the "
            "contract only) and reports the law as information.",
        ),
        _member(
            "tree-prefix-matching-accepts-more",
            prefix_matching_target_only,
            "target-only",
            "conformant",
            "quick",
            "Target-only tree verifier matching children by token prefix: after accepting a token it also tries the "
            "subtree of a duplicate sibling holding it, so it accepts more than the target-only walk (0.01-0.04 tokens "
            "a step at V = 4) and is lossless; accepting more is information, never lossy.",
        ),
        _member(
            "tree-block-verification-token-wise-residual",
            _TokenWiseResidual(),
            "block-verification",
            "lossy",
            "quick",
            "Block verification's stopping rule with the token-wise residual norm([p - q]_+) instead of norm([w p - "
            "q]_+) (vllm-ascend #7807, #7839).",
        ),
    )
}
