"""Sequoia's successor lists with prefix offsets to and from :class:`~specverify._trees.contract.TreeBatch`.

Sequoia (Infini-AI-Lab/Sequoia ``Tree/SpecTree.py``) grows a tree of ``N`` nodes after a prefix of
``P`` committed tokens in one token buffer: tree node ``i`` (node 0 the root, the prefix's last
token) sits at position ``i + P - 1`` of ``tokens``, so every per-position buffer (the tokens, the
coins ``r``) is read at ``node + offset`` with ``offset = P - 1``, while the laws
(``target_logits``, ``draft_logits``) are indexed by tree node.  ``Successors[i]`` lists node
``i``'s children in the order they are tried; Sequoia grows children after their parents, so a
successor has a larger index than its node.  The verifier answers ``accept_list`` (positions: the
prefix ``0 .. P-1``, then the accepted nodes' positions) and the token it draws after them.

Here ``successors`` is a tensor ``[B, N, C]`` (``-1`` padded; :meth:`SequoiaTree.successor_lists`
gives Sequoia's Python lists) and ``accept_list`` is ``[B, P + D]``, ``-1`` padded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from .contract import PADDING, TreeBatch
from .converters import canonical_order, renumbered

__all__ = ["SequoiaTree", "from_sequoia", "to_sequoia"]


@dataclasses.dataclass(frozen=True, eq=False)
class SequoiaTree:
    """A TreeBatch in Sequoia's layout, with the maps to translate outputs both ways.

    ``successors [B, N, C]`` is in *canonical* node numbering; ``order[b, n]`` is Sequoia's node of
    canonical node ``n``; ``prefix_len`` is ``P``, the committed tokens before the tree.
    """

    tree: TreeBatch
    order: torch.Tensor
    successors: torch.Tensor
    prefix_len: int = 1

    @property
    def offset(self) -> int:
        """``P - 1``: node ``i``'s position in the token buffer is ``i + offset``."""
        return self.prefix_len - 1

    def successor_lists(self, row: int = 0) -> list[list[int]]:
        """Row ``row``'s successors as Sequoia's ``Successors`` (one list per node, try order)."""
        return [[c for c in children if c >= 0] for children in self.successors[row].tolist()]

    def sequence(self, prefix: torch.Tensor | None = None) -> torch.Tensor:
        """``tokens [B, P - 1 + N]``: the prefix (default: the root's token at every prefix
        position), then nodes ``1 .. N-1`` (padding nodes 0)."""
        tree = self.tree
        if prefix is None:
            prefix = tree.tokens[:, :1].clamp_min(0).expand(tree.batch, self.prefix_len)
        if prefix.shape != (tree.batch, self.prefix_len):
            raise ValueError(
                f"SequoiaTree.sequence: prefix has shape {tuple(prefix.shape)}, expected [{tree.batch}, "
                f"{self.prefix_len}]"
            )
        return torch.cat([prefix.to(torch.int64), torch.where(tree.real, tree.tokens, 0)[:, 1:]], dim=1)

    def to_path(self, accept_list: torch.Tensor, token: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequoia's ``(accept_list [B, P + D], token [B])`` as the tree contract's ``(path, token)``.

        A position that names no node (in the prefix but not its last, or past the row) becomes
        node ``N`` (out of range), and a prefix that is not ``0 .. P-1`` makes the root node ``N``,
        so the audit reports them instead of the conversion hiding them.
        """
        batch, width = self.order.shape
        positions = accept_list.to(torch.int64)
        columns = self.tree.depth + 1
        local = positions[:, self.offset :] - self.offset
        if local.shape[1] < columns:
            local = torch.cat([local, local.new_full((batch, columns - local.shape[1]), -1 - self.offset)], dim=1)
        local = local[:, :columns]
        taken = local > -1 - self.offset
        inverse = torch.full((batch, width + 1), width, dtype=torch.int64, device=positions.device)
        b, n = (self.order >= 0).nonzero(as_tuple=True)
        inverse[b, self.order[b, n]] = n
        path = torch.where(taken, inverse.gather(1, torch.where((local >= 0) & (local < width), local, width)), -1)
        expected = torch.arange(self.prefix_len, device=positions.device)
        prefix_ok = (
            (positions[:, : self.prefix_len] == expected).all(dim=1) if positions.shape[1] >= self.prefix_len else False
        )
        path[:, 0] = torch.where(torch.as_tensor(prefix_ok, device=positions.device), path[:, 0], width)
        return path, token.to(torch.int64).reshape(batch)

    def from_path(self, path: torch.Tensor, token: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The tree contract's ``(path, token)`` as Sequoia's ``(accept_list, token)``."""
        batch = path.shape[0]
        local = torch.where(path >= 0, self.order.gather(1, path.clamp_min(0)), -1)
        prefix = torch.arange(self.offset, device=path.device).expand(batch, self.offset)
        nodes = torch.where(local >= 0, local + self.offset, -1)
        return torch.cat([prefix, nodes], dim=1), token


def _successor_tensor(
    successors: torch.Tensor | Sequence[Sequence[int]] | Sequence[Sequence[Sequence[int]]], batch: int, width: int
) -> torch.Tensor:
    """``[B, N, C]`` int64 from a tensor (``[N, C]`` shared or ``[B, N, C]``) or Python lists."""
    if not isinstance(successors, torch.Tensor):
        rows: list[Any] = list(successors)
        nested = any(isinstance(x, Sequence) and any(isinstance(y, Sequence) for y in x) for x in rows)
        per_row: list[list[list[int]]] = [
            [[int(c) for c in node] for node in row] for row in (rows if nested else [rows] * batch)
        ]
        most = max((len(c) for row in per_row for c in row), default=0)
        table = torch.full((len(per_row), width, max(most, 1)), -1, dtype=torch.int64)
        for b, row in enumerate(per_row):  # Python lists: one tree of at most N nodes a row
            if len(row) > width:
                raise ValueError(
                    f"Sequoia layout: row {b} lists successors for {len(row)} nodes, more than N = {width}"
                )
            for i, children in enumerate(row):
                table[b, i, : len(children)] = torch.tensor(children, dtype=torch.int64)
        successors = table
    if successors.dim() == 2:
        successors = successors[None].expand(batch, *successors.shape)
    if successors.dim() != 3 or successors.shape[:2] != (batch, width):
        raise ValueError(
            f"Sequoia layout: successors has shape {tuple(successors.shape)}, expected [{batch}, {width}, C] or "
            f"[{width}, C]"
        )
    return successors.to(torch.int64)


def from_sequoia(
    successors: torch.Tensor | Sequence[Sequence[int]] | Sequence[Sequence[Sequence[int]]],
    tokens: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
    *,
    prefix_len: int = 1,
) -> SequoiaTree:
    """Sequoia's successor lists (one ``Successors`` for the batch, one per row, or a ``-1``
    padded tensor) over the token buffer ``tokens [B, P - 1 + N]`` (node ``i`` at ``i + P - 1``)
    and per-node laws ``target_probs [B, N, V]``, ``draft_probs`` (the law each node's children
    were drawn from).  Nodes the root's successors never reach are padding."""
    batch, width = target_probs.shape[:2]
    if prefix_len < 1 or tokens.shape != (batch, prefix_len - 1 + width):
        raise ValueError(
            f"Sequoia layout: tokens has shape {tuple(tokens.shape)}, expected [{batch}, {prefix_len - 1 + width}] "
            f"(prefix_len {prefix_len} >= 1, then N = {width} nodes)"
        )
    table = _successor_tensor(successors, batch, width)
    listed = table >= 0
    if ((listed & (table >= width)) | (table < -1)).any():
        raise ValueError(f"Sequoia layout: a successor is outside [1, {width})")
    if ((table[:, :, 1:] >= 0) & ~listed[:, :, :-1]).any():
        raise ValueError("Sequoia layout: a successor list has a -1 before a node")
    node = torch.arange(width, device=table.device)[None, :, None].expand_as(table)
    if (listed & (table <= node)).any():
        raise ValueError(
            "Sequoia layout: a successor does not come after its node (a parent after its child; Sequoia grows "
            "children after their parents)"
        )
    b = torch.arange(batch, device=table.device)[:, None, None].expand_as(table)[listed]
    child = table[listed]
    times = torch.zeros(batch, width, dtype=torch.int64, device=table.device)
    times.index_put_((b, child), torch.ones_like(child), accumulate=True)
    if (times > 1).any():
        raise ValueError("Sequoia layout: a node is the successor of two nodes (or listed twice)")
    parents = torch.full((batch, width), PADDING, dtype=torch.int64, device=table.device)
    parents[b, child] = node[listed]
    parents[:, 0] = -1
    for _ in range(width):  # children after parents: a node is in the tree iff its parent is
        pruned = torch.where((parents >= 0) & (parents.gather(1, parents.clamp_min(0)) == PADDING), PADDING, parents)
        if torch.equal(pruned, parents):
            break
        parents = pruned
    rank = torch.zeros_like(parents)
    rank[b, child] = torch.arange(table.shape[2], device=table.device).expand_as(table)[listed]
    order = canonical_order(parents, rank)
    node_tokens = torch.cat([tokens[:, prefix_len - 1 : prefix_len], tokens[:, prefix_len:]], dim=1)
    tree = renumbered(order, parents, node_tokens, target_probs, draft_probs)
    inverse = torch.full((batch, width + 1), -1, dtype=torch.int64, device=table.device)
    rows, n = (order >= 0).nonzero(as_tuple=True)
    inverse[rows, order[rows, n]] = n
    canonical = torch.where(listed, inverse.gather(1, table.clamp_min(0).reshape(batch, -1)).reshape(table.shape), -1)
    ranked = canonical.gather(1, order.clamp_min(0)[:, :, None].expand_as(canonical))
    return SequoiaTree(tree, order, torch.where((order >= 0)[:, :, None], ranked, -1), prefix_len)


def to_sequoia(tree: TreeBatch, prefix_len: int = 1) -> SequoiaTree:
    """A TreeBatch in Sequoia's layout after ``prefix_len`` committed tokens (node numbering kept)."""
    if prefix_len < 1:
        raise ValueError(f"to_sequoia: prefix_len is {prefix_len}, need >= 1 (the root is the prefix's last token)")
    order = torch.where(tree.real, torch.arange(tree.width, device=tree.parents.device), -1)
    return SequoiaTree(tree, order, tree.children.clone(), prefix_len)
