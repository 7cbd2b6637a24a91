"""SGLang's tree layout to and from :class:`~specverify._trees.contract.TreeBatch`, and the renumbering every
converter shares.

* SGLang (``tree_speculative_sampling_target_only``, EAGLE with topk > 1): per row ``N`` nodes,
  node 0 the root; ``candidates [B, N]`` (token per node), ``retrive_index [B, N]`` (each node's
  flat index into ``predicts``), ``retrive_next_token [B, N]`` (first child, -1 none),
  ``retrive_next_sibling [B, N]`` (next sibling tried, -1 none), ``target_probs [B, N, V]``
  (the law after each node).  Outputs: ``accept_index [B, D+1]`` (flat indices of the accepted
  nodes, root first, -1 padded), ``accept_token_num [B]`` (accepted nodes after the root),
  ``predicts [B * N]`` (at each accepted node's flat index, the token that follows it: the next
  accepted node's token, or the emitted token after the last one).
An engine may number nodes in any order; a row numbered as :class:`TreeBatch` requires (parents
first, siblings in try order, unused nodes last) keeps its numbering, any other is renumbered breadth
first with siblings in try order; the converters keep the map to translate outputs back.
"""

from __future__ import annotations

import dataclasses

import torch

from .contract import PADDING, TreeBatch

__all__ = ["SGLangTree", "canonical_order", "from_sglang", "renumbered", "sglang_arrays", "to_sglang"]


# --- renumbering -----------------------------------------------------------------------------


def canonical_order(parents: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """``order [B, N]``: the source node at each canonical index (padding sources last, -1 past them).

    ``parents`` is in source numbering (-1 root at 0, ``PADDING`` for nodes outside the tree);
    ``key`` orders siblings (smaller is tried first).  Canonical order is breadth first, by parent's
    canonical index, then by key: parents precede children and siblings are numbered in try order.
    """
    batch, width = parents.shape
    real = parents != PADDING
    depth = torch.where(parents == -1, 0, width)  # width: not reached yet
    for _ in range(width):  # source parents need not precede their children
        from_parent = depth.gather(1, parents.clamp_min(0)) + 1
        depth = torch.where(real & (parents >= 0), torch.minimum(from_parent, torch.full_like(depth, width)), depth)
    if (real & (depth >= width)).any():
        raise ValueError("tree layout: a node is not connected to the root (a cycle or a dangling parent)")
    new = torch.where(parents == -1, 0, -1)
    count = (parents == -1).sum(dim=1, keepdim=True)
    scale = int(key.max().clamp_min(0)) + 1
    for level in range(1, int(torch.where(real, depth, 0).max()) + 1):
        at_level = real & (depth == level)
        sort_key = torch.where(at_level, new.gather(1, parents.clamp_min(0)) * scale + key, (width + 1) * scale)
        ranked = sort_key.argsort(dim=1, stable=True)
        sizes = at_level.sum(dim=1, keepdim=True)
        take = torch.arange(width, device=parents.device) < sizes
        positions = count + torch.arange(width, device=parents.device)
        b, j = take.nonzero(as_tuple=True)
        new[b, ranked[b, j]] = positions[b, j]
        count = count + sizes
    order = torch.full_like(parents, -1)
    b, i = (new >= 0).nonzero(as_tuple=True)
    order[b, new[b, i]] = i
    # a row already numbered as TreeBatch requires keeps its numbering
    index = torch.arange(width, device=parents.device)
    same = (parents[:, :, None] == parents[:, None, :]) & real[:, :, None] & (index[:, None] < index[None, :])
    valid = ~(same & (key[:, :, None] >= key[:, None, :])).any(dim=(1, 2))
    valid &= ~(real & (index > 0) & (parents >= index)).any(dim=1)
    valid &= ~(real[:, 1:] & ~real[:, :-1]).any(dim=1)
    identity = torch.where(real, index, -1)
    return torch.where(valid[:, None], identity, order)


def renumbered(
    order: torch.Tensor,
    parents_src: torch.Tensor,
    tokens: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None,
) -> TreeBatch:
    inverse = torch.full_like(order, -1)
    b, n = (order >= 0).nonzero(as_tuple=True)
    inverse[b, order[b, n]] = n
    src = order.clamp_min(0)
    present = order >= 0
    parent_src = parents_src.gather(1, src)
    parents = torch.where(parent_src >= 0, inverse.gather(1, parent_src.clamp_min(0)), -1)
    parents = torch.where(present, parents, PADDING)
    rows = torch.arange(order.shape[0], device=order.device)[:, None]
    return TreeBatch(
        parents,
        torch.where(present, tokens.gather(1, src).to(torch.int64), -1),
        target[rows, src],
        None if draft is None else draft[rows, src],
    )


# --- SGLang ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class SGLangTree:
    """A TreeBatch made from SGLang's arrays, with the maps to translate outputs both ways.

    ``order[b, n]`` is the SGLang node (local index) of canonical node ``n``.
    """

    tree: TreeBatch
    order: torch.Tensor
    retrive_index: torch.Tensor

    def empty_outputs(self, dtype: torch.dtype = torch.int32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``predicts [B*N]``, ``accept_index [B, D+1]``, ``accept_token_num [B]`` for a kernel to fill."""
        batch, width = self.order.shape
        device = self.order.device
        return (
            torch.full((batch * width,), -1, dtype=dtype, device=device),
            torch.full((batch, self.tree.depth + 1), -1, dtype=dtype, device=device),
            torch.zeros(batch, dtype=dtype, device=device),
        )

    def to_path(
        self, predicts: torch.Tensor, accept_index: torch.Tensor, accept_token_num: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """SGLang's outputs as the tree contract's ``(path, token)``.

        An index that names no node of the row becomes node ``N`` (out of range), so the audit
        reports it instead of the conversion hiding it.
        """
        batch, width = self.order.shape
        columns = self.tree.depth + 1
        accept = accept_index.to(torch.int64)[:, :columns]
        if accept.shape[1] < columns:
            accept = torch.cat([accept, accept.new_full((batch, columns - accept.shape[1]), -1)], dim=1)
        count = accept_token_num.to(torch.int64)
        flat_of_node = torch.where(
            self.order >= 0, self.retrive_index.to(torch.int64).gather(1, self.order.clamp_min(0)), -3
        )
        match = accept[:, :, None] == flat_of_node[:, None, :]
        node = torch.where(match.any(-1), match.to(torch.int64).argmax(-1), width)  # width: no such node
        steps = torch.arange(columns, device=accept.device)
        path = torch.where(steps <= count[:, None], node, -1)
        path[:, 0] = torch.where((count >= 0) & (count < columns), path[:, 0], width)  # a count the path cannot hold
        last = accept.gather(1, count.clamp(0, columns - 1)[:, None]).squeeze(1)
        token = predicts.to(torch.int64)[last.clamp(0, predicts.numel() - 1)]
        return path, token

    def from_path(self, path: torch.Tensor, token: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The tree contract's ``(path, token)`` as SGLang's ``(predicts, accept_index, accept_token_num)``."""
        predicts, accept_index, accept_token_num = self.empty_outputs(torch.int64)
        taken = path >= 0
        local = self.order.gather(1, path.clamp_min(0))
        flat = torch.where(taken, self.retrive_index.to(torch.int64).gather(1, local), -1)
        accept_index[:, : path.shape[1]] = flat
        accept_token_num = taken.sum(dim=1) - 1
        following = torch.cat([self.tree.path_tokens(path), torch.full_like(token[:, None], -1)], dim=1)
        following[torch.arange(path.shape[0]), accept_token_num] = token
        predicts[flat[taken]] = following[taken]
        return predicts, accept_index, accept_token_num


def from_sglang(
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
) -> SGLangTree:
    """SGLang's first-child / next-sibling arrays as a :class:`SGLangTree`.

    Nodes the root's first-child / next-sibling lists never reach are padding.
    """
    batch, width = candidates.shape
    first_child = retrive_next_token.to(torch.int64)
    next_sibling = retrive_next_sibling.to(torch.int64)
    parents = torch.full((batch, width), PADDING, dtype=torch.int64, device=candidates.device)
    parents[:, 0] = -1
    rank = torch.zeros_like(parents)
    times = torch.zeros_like(parents)
    frontier = first_child.clone()  # the r-th child of every node, all lists walked at once
    for r in range(width + 1):
        live = frontier >= 0
        if not live.any():
            break
        if r == width:
            raise ValueError("SGLang layout: a sibling list is longer than the row (a cycle in retrive_next_sibling)")
        b, i = live.nonzero(as_tuple=True)
        child = frontier[b, i]
        parents[b, child] = i
        rank[b, child] = r
        times.index_put_((b, child), torch.ones_like(child), accumulate=True)
        frontier = torch.where(live, next_sibling.gather(1, frontier.clamp_min(0)), -1)
    if (times > 1).any() or (times[:, 0] > 0).any():
        raise ValueError(
            "SGLang layout: a node is listed twice by first-child / next-sibling links (or the root is a child)"
        )
    parents = torch.where(_connected(parents), parents, PADDING)
    order = canonical_order(parents, rank)
    tree = renumbered(order, parents, candidates, target_probs, draft_probs)
    return SGLangTree(tree, order, retrive_index)


def _connected(parents: torch.Tensor) -> torch.Tensor:
    """Nodes whose parent chain reaches the root (others are not in the tree)."""
    ancestor = parents.clone()
    for _ in range(parents.shape[1]):
        ancestor = torch.where(ancestor >= 0, parents.gather(1, ancestor.clamp_min(0)), ancestor)
    return ancestor == -1


def to_sglang(tree: TreeBatch) -> SGLangTree:
    """A TreeBatch in SGLang's layout (node numbering kept; ``retrive_index`` is ``b * N + n``)."""
    batch, width = tree.parents.shape
    order = torch.where(tree.real, torch.arange(width, device=tree.parents.device), -1).expand(batch, width).clone()
    retrive_index = torch.arange(batch * width, device=tree.parents.device).reshape(batch, width)
    return SGLangTree(tree, order, retrive_index)


def sglang_arrays(layout: SGLangTree) -> dict[str, torch.Tensor]:
    """``candidates``, ``retrive_index``, ``retrive_next_token``, ``retrive_next_sibling``,
    ``target_probs`` (and ``draft_probs`` if any) of a layout made by :func:`to_sglang`."""
    tree = layout.tree
    children = tree.children
    first_child = children[:, :, 0]
    parent = tree.parents.clamp_min(0)
    next_rank = (tree.sibling_rank + 1).clamp_max(children.shape[2] - 1)
    rows = torch.arange(tree.batch, device=parent.device)[:, None]
    next_sibling = torch.where(tree.sibling_rank + 1 < children.shape[2], children[rows, parent, next_rank], -1)
    next_sibling = torch.where(tree.real & (tree.parents >= 0), next_sibling, -1)
    arrays = {
        "candidates": torch.where(tree.real, tree.tokens, 0),
        "retrive_index": layout.retrive_index,
        "retrive_next_token": first_child,
        "retrive_next_sibling": next_sibling,
        "target_probs": tree.target_probs,
    }
    if tree.draft_probs is not None:
        arrays["draft_probs"] = tree.draft_probs
    return arrays
