"""Leaf-path layouts (EAGLE, Medusa) to and from :class:`~specverify._trees.contract.TreeBatch`.

Both engines verify a tree through its *leaf-path matrix* ``retrieve_indices [L, D+1]``: one
root-to-leaf path of node indices per leaf, ``-1`` padded, so that ``values[retrieve_indices]``
lays any per-node tensor out along the paths (``candidates [L, D+1]``, the target's
``logits [L, D+1, V]``).  The verifier answers ``best_candidate`` (a leaf row whose prefix is the
accepted path) and ``accept_length`` (accepted nodes after the root).  Here the matrix has a batch
dimension, ``[B, L, D+1]``, one tree per row; a row with fewer leaves is padded with rows of -1.

* EAGLE (SafeAILab/EAGLE ``eagle/model/utils.py``): rows in depth-first try order; a node's
  children are tried in the order they first appear in the rows (``candidates`` is ``-1`` padded);
  the draft laws come *per parent*: EAGLE-1 keeps one draft row per node that has children
  (``op[depth][p_indices[j][i]]``) and the draft probability of each candidate
  (``cart_candidates_prob``): :attr:`EagleTree.draft_rows`, :attr:`EagleTree.parent_rows`,
  :attr:`EagleTree.draft_token_probs`.
* Medusa (FasterDecoding/Medusa ``medusa/model/utils.py``): the tree is in the candidate buffers,
  ``medusa_attn_mask [N, N]`` (a node sees itself and its ancestors), ``medusa_position_ids [N]``
  (depths) and ``retrieve_indices``, nodes numbered by depth then by the heads' top-k rank, which is
  the try order; rows run from the deepest leaf back (Medusa's order), and ``candidates`` is padded
  with token 0, which a verifier must not read as a candidate (check ``retrieve_indices >= 0``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from .contract import PADDING, TreeBatch
from .converters import canonical_order, renumbered

__all__ = ["EagleTree", "MedusaTree", "from_eagle", "from_medusa", "to_eagle", "to_medusa"]


# --- leaf paths --------------------------------------------------------------------------------


def node_paths(tree: TreeBatch) -> torch.Tensor:
    """``[B, N, D+1]``: the root-to-node path of every node (root first, -1 padded; padding rows -1)."""
    batch, width = tree.parents.shape
    depth = tree.node_depth
    paths = torch.full((batch, width, tree.depth + 1), -1, dtype=torch.int64, device=tree.parents.device)
    current = torch.arange(width, device=tree.parents.device).expand(batch, width).clone()
    alive = tree.real.clone()
    for k in range(tree.depth + 1):
        column = depth - k
        b, n = (alive & (column >= 0)).nonzero(as_tuple=True)
        paths[b, n, column[b, n]] = current[b, n]
        current = torch.where(current > 0, tree.parents.gather(1, current.clamp_min(0)), -1)
        alive &= current >= 0
    return paths


def _leaf_rows(tree: TreeBatch, key: torch.Tensor) -> torch.Tensor:
    """``[B, L, D+1]``: the leaves' paths, leaves in increasing ``key [B, N]``, rows of -1 after."""
    paths = node_paths(tree)
    leaf = tree.real & (tree.children[:, :, 0] < 0)
    ranked = torch.where(leaf, key, key.max() + 1).argsort(dim=1, stable=True)
    count = int(leaf.sum(dim=1).max())
    rows = paths.gather(1, ranked[:, :count, None].expand(-1, -1, paths.shape[2]))
    return torch.where(leaf.gather(1, ranked[:, :count])[:, :, None], rows, -1)


def _depth_first_key(tree: TreeBatch) -> torch.Tensor:
    """``[B, N]``: a node's place in depth-first try order (canonical numbering is breadth first)."""
    paths = node_paths(tree)
    order = torch.arange(tree.width, device=paths.device).expand(tree.batch, -1).clone()
    for column in reversed(range(paths.shape[2])):  # least significant column first, stable sorts
        step = paths[:, :, column].gather(1, order).argsort(dim=1, stable=True)
        order = order.gather(1, step)
    key = torch.empty_like(order)
    key.scatter_(1, order, torch.arange(tree.width, device=paths.device).expand_as(order).contiguous())
    return key


@dataclasses.dataclass(frozen=True, eq=False)
class _LeafPaths:
    """What EAGLE's and Medusa's layouts share: the leaf-path matrix and the outputs through it."""

    tree: TreeBatch
    order: torch.Tensor
    retrieve_indices: torch.Tensor

    def along_paths(self, values: torch.Tensor, fill: float = 0) -> torch.Tensor:
        """``values [B, N, ...]`` (per canonical node) laid out along the paths, ``[B, L, D+1, ...]``."""
        batch, leaves, columns = self.retrieve_indices.shape
        flat = self.retrieve_indices.clamp_min(0).reshape(batch, -1)
        shape = (batch, leaves * columns, *values.shape[2:])
        index = flat.reshape(batch, -1, *([1] * (values.dim() - 2))).expand(shape)
        out = values.gather(1, index).reshape(batch, leaves, columns, *values.shape[2:])
        pad = (self.retrieve_indices < 0).reshape(batch, leaves, columns, *([1] * (values.dim() - 2)))
        return torch.where(pad, torch.as_tensor(fill, dtype=values.dtype, device=values.device), out)

    @property
    def target_probs(self) -> torch.Tensor:
        """``[B, L, D+1, V]``: the target law after each path node (the engines' ``logits[retrieve_indices]``)."""
        return self.along_paths(self.tree.target_probs)

    def to_path(self, best_candidate: torch.Tensor, accept_length: torch.Tensor) -> torch.Tensor:
        """``path [B, D+1]`` from ``(best_candidate [B], accept_length [B])``.

        A row or a length the matrix cannot hold becomes node ``N`` (out of range), so the audit
        reports it instead of the conversion hiding it.
        """
        batch, leaves, columns = self.retrieve_indices.shape
        best = best_candidate.to(torch.int64).reshape(batch)
        length = accept_length.to(torch.int64).reshape(batch)
        rows = self.retrieve_indices[torch.arange(batch), best.clamp(0, leaves - 1)]
        steps = torch.arange(columns, device=rows.device)
        path = torch.where(steps <= length[:, None], rows, -1)
        broken = (best < 0) | (best >= leaves) | (length < 0) | (length >= columns)
        path[:, 0] = torch.where(broken, self.tree.width, path[:, 0])
        return path

    def from_path(self, path: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(best_candidate, accept_length)``: the first leaf row whose prefix is the path."""
        columns = self.retrieve_indices.shape[2]
        path = path[:, :columns]
        taken = path >= 0
        agree = (self.retrieve_indices[:, :, : path.shape[1]] == path[:, None, :]) | ~taken[:, None, :]
        match = agree.all(dim=-1) & (self.retrieve_indices[:, :, 0] == 0)
        if not match.any(dim=1).all():
            raise ValueError("leaf-path layout: a path is no prefix of any row of retrieve_indices")
        return match.to(torch.int64).argmax(dim=1), taken.sum(dim=1) - 1


def _batched(value: torch.Tensor, dims: int, batch: int, name: str) -> torch.Tensor:
    """``value`` with a batch dimension: shared (``dims`` dimensions) or per row (``dims + 1``)."""
    if value.dim() == dims:
        return value.to(torch.int64)[None].expand(batch, *value.shape)
    if value.dim() == dims + 1 and value.shape[0] == batch:
        return value.to(torch.int64)
    raise ValueError(
        f"{name} has shape {tuple(value.shape)}: expected {dims} dimensions (shared) or {dims + 1} with batch {batch} "
        "first"
    )


def _parents_from_rows(paths: torch.Tensor, width: int, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(parents [B, N], first_row [B, N])`` from leaf rows ``[B, L, D+1]`` in the source numbering."""
    batch, leaves, columns = paths.shape
    if ((paths < -1) | (paths >= width)).any():
        raise ValueError(f"{where}: retrieve_indices names a node outside [-1, {width})")
    live = paths[:, :, 0] >= 0
    if (live & (paths[:, :, 0] != 0)).any() or ((~live)[:, :, None] & (paths >= 0)).any():
        raise ValueError(f"{where}: every row of retrieve_indices starts at the root 0 (a padding row is all -1)")
    if ((paths[:, :, 1:] >= 0) & (paths[:, :, :-1] < 0)).any():
        raise ValueError(f"{where}: a row of retrieve_indices is not a prefix chain (a node after -1)")
    if (paths[:, :, 1:] == 0).any():
        raise ValueError(f"{where}: the root 0 appears below the root in retrieve_indices")
    edge = paths[:, :, 1:] >= 0
    b = torch.arange(batch, device=paths.device)[:, None, None].expand_as(edge)[edge]
    child, parent = paths[:, :, 1:][edge], paths[:, :, :-1][edge]
    flat = b * width + child
    low = torch.full((batch * width,), width, dtype=torch.int64, device=paths.device).scatter_reduce(
        0, flat, parent, "amin"
    )
    high = torch.full((batch * width,), -1, dtype=torch.int64, device=paths.device).scatter_reduce(
        0, flat, parent, "amax"
    )
    if (high[flat] != low[flat]).any():
        raise ValueError(f"{where}: a node has two different parents in retrieve_indices")
    parents = torch.where(high >= 0, high, PADDING).reshape(batch, width)
    parents[:, 0] = torch.where(live.any(dim=1), -1, PADDING)
    row = torch.arange(leaves, device=paths.device)[None, :, None].expand_as(edge)[edge]
    first_row = torch.full((batch * width,), leaves, dtype=torch.int64, device=paths.device).scatter_reduce(
        0, flat, row, "amin"
    )
    return parents, first_row.reshape(batch, width)


def _canonical_rows(order: torch.Tensor, paths: torch.Tensor) -> torch.Tensor:
    """Source-numbered rows ``[B, L, D+1]`` in the canonical numbering ``order`` defines."""
    inverse = torch.full_like(order, -1)
    b, n = (order >= 0).nonzero(as_tuple=True)
    inverse[b, order[b, n]] = n
    flat = paths.clamp_min(0).reshape(paths.shape[0], -1)
    return torch.where(paths >= 0, inverse.gather(1, flat).reshape(paths.shape), -1)


# --- EAGLE ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class EagleTree(_LeafPaths):
    """A TreeBatch in EAGLE's leaf-path layout, with per-parent draft rows and the maps for outputs.

    ``retrieve_indices [B, L, D+1]`` is in *canonical* node numbering; ``order[b, n]`` is EAGLE's
    node of canonical node ``n``.
    """

    @property
    def candidates(self) -> torch.Tensor:
        """``[B, L, D+1]``: the token at each path node, -1 padded (EAGLE's ``cart_candidates``)."""
        return self.along_paths(torch.where(self.tree.real, self.tree.tokens, -1), fill=-1)

    @property
    def draft_rows(self) -> torch.Tensor:
        """``[B, P, V]``: the draft law of each node with children, in node order (EAGLE-1's ``op``)."""
        parent = self.tree.children[:, :, 0] >= 0
        rank = parent.cumsum(dim=1) - 1
        draft = self._draft()
        rows = torch.zeros(
            self.tree.batch,
            max(int(parent.sum(dim=1).max()), 1),
            self.tree.vocab,
            dtype=draft.dtype,
            device=draft.device,
        )
        b, n = parent.nonzero(as_tuple=True)
        rows[b, rank[b, n]] = draft[b, n]
        return rows

    @property
    def parent_rows(self) -> torch.Tensor:
        """``[B, L, D+1]``: the row of :attr:`draft_rows` each path node was drawn from (EAGLE-1's
        ``p_indices``); -1 at the root and at padding."""
        has_children = self.tree.children[:, :, 0] >= 0
        rank = torch.where(has_children, has_children.cumsum(dim=1) - 1, -1)
        parent_rank = torch.where(self.tree.parents >= 0, rank.gather(1, self.tree.parents.clamp_min(0)), -1)
        return self.along_paths(parent_rank, fill=-1)

    @property
    def draft_token_probs(self) -> torch.Tensor:
        """``[B, L, D+1]``: each path node's draft probability at its parent (EAGLE-1's
        ``cart_candidates_prob``); 1 at the root and at padding, as EAGLE pads it."""
        parent = self.tree.parents.clamp_min(0)
        draft = self._draft()
        rows = torch.arange(self.tree.batch, device=parent.device)[:, None]
        token = self.tree.tokens.clamp_min(0)
        q = draft[rows, parent, token]
        q = torch.where(self.tree.parents >= 0, q, 1.0)
        return self.along_paths(q, fill=1.0)

    def _draft(self) -> torch.Tensor:
        if self.tree.draft_probs is None:
            raise ValueError("EagleTree: the tree has no draft_probs (a target-only verifier reads none)")
        return self.tree.draft_probs


def from_eagle(
    retrieve_indices: torch.Tensor,
    tokens: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
) -> EagleTree:
    """EAGLE's leaf-path matrix (``[L, D+1]`` shared or ``[B, L, D+1]``, -1 padded) over per-node
    ``tokens [B, N]``, ``target_probs [B, N, V]`` and ``draft_probs`` (the law each node's children
    were drawn from).  Children are tried in the order they first appear in the rows; nodes on no
    row are padding."""
    batch, width = tokens.shape
    paths = _batched(retrieve_indices, 2, batch, "EAGLE layout: retrieve_indices")
    parents, first_row = _parents_from_rows(paths, width, "EAGLE layout")
    order = canonical_order(parents, first_row)
    tree = renumbered(order, parents, tokens, target_probs, draft_probs)
    return EagleTree(tree, order, _canonical_rows(order, paths))


def to_eagle(tree: TreeBatch) -> EagleTree:
    """A TreeBatch in EAGLE's layout: one row per leaf, in depth-first try order (node numbering kept)."""
    order = torch.where(tree.real, torch.arange(tree.width, device=tree.parents.device), -1)
    return EagleTree(tree, order, _leaf_rows(tree, _depth_first_key(tree)))


# --- Medusa --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class MedusaTree(_LeafPaths):
    """A TreeBatch in Medusa's candidate buffers, with the maps for outputs.

    ``retrieve_indices [B, L, D+1]`` is in *canonical* node numbering, which is Medusa's (depth, then
    top-k rank) for a tree built from ``medusa_choices``; ``order[b, n]`` is Medusa's node of
    canonical node ``n``.
    """

    @property
    def tree_candidates(self) -> torch.Tensor:
        """``[B, N]``: the token at each node (Medusa's ``tree_candidates``); padding nodes 0."""
        return torch.where(self.tree.real, self.tree.tokens, 0)

    @property
    def candidates(self) -> torch.Tensor:
        """``[B, L, D+1]``: the token at each path node, padded with 0 as Medusa pads it."""
        return self.along_paths(self.tree_candidates, fill=0)

    def buffers(self) -> dict[str, torch.Tensor]:
        """``medusa_attn_mask [B, N, N]`` (1 where a node sees a node: itself and its ancestors; a
        padding node sees none), ``medusa_position_ids [B, N]`` (depth, -1 at padding) and
        ``retrieve_indices [B, L, D+1]``, as ``generate_medusa_buffers`` makes them (no ``tree_indices``:
        the tokens come from :attr:`tree_candidates`, not from the heads' top-k)."""
        paths = node_paths(self.tree)
        mask = torch.zeros(self.tree.batch, self.tree.width, self.tree.width, dtype=torch.float32, device=paths.device)
        b, n, k = (paths >= 0).nonzero(as_tuple=True)
        mask[b, n, paths[b, n, k]] = 1.0
        return {
            "medusa_attn_mask": mask,
            "medusa_position_ids": self.tree.node_depth,
            "retrieve_indices": self.retrieve_indices,
        }


def _parents_from_mask(mask: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """``parents [B, N]`` from an ancestor-or-self mask and the depths (padding: no self entry)."""
    batch, width, _ = mask.shape
    seen = mask != 0
    eye = torch.eye(width, dtype=torch.bool, device=mask.device)
    real = seen[:, eye]
    if not real[:, 0].all() or (depth[:, 0] != 0).any():
        raise ValueError("Medusa layout: node 0 is the root (it sees itself, at position 0)")
    strict = seen & ~eye
    if (strict & ~real[:, None, :]).any() or (seen[~real]).any():
        raise ValueError("Medusa layout: medusa_attn_mask links a padding node (one that does not see itself)")
    above = strict & (depth[:, None, :] == depth[:, :, None] - 1)
    parents = torch.where(above.any(dim=2), above.to(torch.int64).argmax(dim=2), PADDING)
    parents[:, 0] = -1
    index = torch.arange(width, device=mask.device)
    child = real & (index > 0)
    if (child & ((strict.sum(dim=2) != depth) | (above.sum(dim=2) != 1))).any():
        raise ValueError(
            "Medusa layout: a node's ancestors in medusa_attn_mask are not one per depth above it (position ids and "
            "mask disagree)"
        )
    inherited = torch.gather(strict | eye, 1, parents.clamp_min(0)[:, :, None].expand(-1, -1, width))
    if (child[:, :, None] & (inherited != strict)).any():
        raise ValueError("Medusa layout: a node does not see exactly its parent and the parent's ancestors")
    return torch.where(real, parents, PADDING)


def from_medusa(
    medusa_buffers: Mapping[str, torch.Tensor],
    tree_candidates: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
) -> MedusaTree:
    """Medusa's candidate buffers (``medusa_attn_mask``, ``medusa_position_ids``,
    ``retrieve_indices``; shared or one per row) over per-node ``tree_candidates [B, N]`` and
    ``target_probs [B, N, V]`` (``tree_logits`` as laws).  Siblings are tried in node order (the
    heads' top-k rank); each row of ``retrieve_indices`` must be a path of the mask's tree."""
    batch, width = tree_candidates.shape
    mask = medusa_buffers["medusa_attn_mask"]
    mask = mask.reshape(mask.shape[-2:]) if mask.dim() == 4 and mask.shape[:2] == (1, 1) else mask
    mask = _batched(mask, 2, batch, "Medusa layout: medusa_attn_mask")
    depth = _batched(medusa_buffers["medusa_position_ids"], 1, batch, "Medusa layout: medusa_position_ids")
    paths = _batched(medusa_buffers["retrieve_indices"], 2, batch, "Medusa layout: retrieve_indices")
    if mask.shape[1:] != (width, width) or depth.shape[1] != width:
        raise ValueError(
            f"Medusa layout: medusa_attn_mask {tuple(mask.shape)} and medusa_position_ids {tuple(depth.shape)} need N "
            f"= {width} nodes"
        )
    parents = _parents_from_mask(mask, depth)
    row_parents, _ = _parents_from_rows(paths, width, "Medusa layout")
    on_rows = row_parents != PADDING
    if (on_rows & (row_parents != parents)).any():
        raise ValueError("Medusa layout: a row of retrieve_indices is not a path of medusa_attn_mask's tree")
    if (~on_rows & (parents != PADDING)).any():
        raise ValueError("Medusa layout: a node of medusa_attn_mask's tree is on no row of retrieve_indices")
    order = canonical_order(parents, torch.arange(width, device=parents.device).expand(batch, width))
    tree = renumbered(order, parents, tree_candidates, target_probs, draft_probs)
    return MedusaTree(tree, order, _canonical_rows(order, paths))


def to_medusa(tree: TreeBatch) -> MedusaTree:
    """A TreeBatch in Medusa's buffers: rows from the deepest leaf back, as Medusa orders them."""
    order = torch.where(tree.real, torch.arange(tree.width, device=tree.parents.device), -1)
    key = -(tree.node_depth * (tree.width + 1) + torch.arange(tree.width, device=tree.parents.device))
    return MedusaTree(tree, order, _leaf_rows(tree, key))
