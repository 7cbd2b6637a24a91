"""A tree sampler's declared limits, and the trees posed within them.

Real verifiers have limits the contract alone does not express: a buffer of at most 10 children a
node, a deepest level, a largest tree, and token ids they treat specially (0 read as padding, 2 as
end).  A tree sampler declares them as :class:`~specverify.Capabilities` fields (``max_children``,
``max_depth``, ``max_nodes``, ``reserved_tokens``); :class:`TreeLimits` holds them and says, for a
tree a check would pose, why it cannot be posed (:meth:`TreeLimits.shape_reason`), or gives it in
a form the sampler takes:

* :meth:`TreeLimits.relabel`: a tree whose candidates hold reserved ids, with those ids swapped
  for free ones in its tokens *and* in every law's columns, so the case is the same case up to the
  names of its tokens (every algorithm's law is the same up to that renaming);
* :meth:`TreeLimits.prune`: a generated tree cut to the limits (nodes kept in order while their
  parent is kept and the limits allow);
* :meth:`TreeLimits.drafts_without_reserved`: draft laws with no mass on reserved ids, so trees
  drawn from them never hold one.

With nothing declared every one of these is the identity: a sampler that declares no limits is
posed exactly the trees it was posed before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from .._contract import Capabilities
from .contract import TreeBatch

__all__ = ["TreeLimits", "shape_counts"]


def shape_counts(parents: Sequence[int]) -> tuple[int, int, int]:
    """``(most children of one node, deepest depth, nodes)`` of a tree given by its parents."""
    depth = [0] * len(parents)
    children = [0] * len(parents)
    for node in range(1, len(parents)):
        depth[node] = depth[parents[node]] + 1
        children[parents[node]] += 1
    return max(children, default=0), max(depth, default=0), len(parents)


@dataclasses.dataclass(frozen=True)
class TreeLimits:
    """What a tree sampler declares it takes (``None``: no limit; ``reserved``: never a candidate)."""

    max_children: int | None = None
    max_depth: int | None = None
    max_nodes: int | None = None
    reserved: tuple[int, ...] = ()

    @classmethod
    def of(cls, capabilities: Capabilities) -> TreeLimits:
        return cls(
            capabilities.max_children,
            capabilities.max_depth,
            capabilities.max_nodes,
            tuple(capabilities.reserved_tokens),
        )

    @property
    def declared(self) -> bool:
        return self != TreeLimits()

    def describe(self, *, shape_only: bool = False) -> str:
        """The limits in words (``shape_only``: children, depth, nodes; empty when none is declared)."""
        parts = [
            f"{label} {value}"
            for label, value in (
                ("at most", self.max_children),
                ("depth at most", self.max_depth),
                ("nodes at most", self.max_nodes),
            )
            if value is not None
        ]
        if self.max_children is not None:
            parts[0] += " children a node"
        if self.reserved and not shape_only:
            parts.append(
                f"token{'s' if len(self.reserved) > 1 else ''} {', '.join(map(str, self.reserved))} never a candidate"
            )
        return "; ".join(parts)

    def shape_reason(self, parents: Sequence[int], vocab: int | None = None, *, distinct: bool = False) -> str | None:
        """Why a tree of these ``parents`` cannot be posed, in words, or ``None`` if it can.

        ``distinct``: its siblings must hold distinct tokens drawn from the draft (without
        replacement), so a node's children need as many non-reserved ids of ``vocab``.
        """
        children, depth, nodes = shape_counts(parents)
        if self.max_children is not None and children > self.max_children:
            return f"{children} children at one node, more than the declared max_children={self.max_children}"
        if self.max_depth is not None and depth > self.max_depth:
            return f"depth {depth}, deeper than the declared max_depth={self.max_depth}"
        if self.max_nodes is not None and nodes > self.max_nodes:
            return f"{nodes} nodes, more than the declared max_nodes={self.max_nodes}"
        if distinct and vocab is not None:
            free = vocab - sum(1 for t in self.reserved if t < vocab)
            if children > free:
                return f"{children} distinct siblings, but V={vocab} less the reserved tokens leaves {free} ids"
        return None

    def relabel(self, tree: TreeBatch) -> TreeBatch:
        """The tree with every reserved id among its candidates (nodes 1 on, every row) swapped for a
        free id, nearest first, in the tokens and in every law's columns: the same case, renamed.
        Where ``V`` has too few free ids the vocabulary grows by ids of zero mass to swap with."""
        vocab = tree.vocab
        candidates = tree.tokens[:, 1:][tree.real[:, 1:]]
        used = set(candidates.unique().tolist())
        clash = sorted(t for t in self.reserved if t in used)
        if not clash:
            return tree
        reserved = set(self.reserved)
        free = [t for t in range(vocab) if t not in used and t not in reserved]
        extra = 0
        while len(free) < len(clash):  # grow V by zero-mass ids, skipping reserved ones
            if vocab + extra not in reserved:
                free.append(vocab + extra)
            extra += 1
        width = vocab + extra
        perm = list(range(width))
        for token in clash:
            swap = min(free, key=lambda f: (abs(f - token), f))
            free.remove(swap)
            perm[token], perm[swap] = swap, token
        index = torch.tensor(perm, dtype=torch.int64)

        def law(probs: torch.Tensor | None) -> torch.Tensor | None:
            if probs is None:
                return None
            wide = torch.nn.functional.pad(probs, (0, extra)) if extra else probs
            return wide[..., index]  # a product of swaps is its own inverse: column perm[t] holds column t

        real = tree.real.clone()
        real[:, 0] = False
        tokens = torch.where(real, index[tree.tokens.clamp(0, width - 1)], tree.tokens)
        target = law(tree.target_probs)
        assert target is not None
        return TreeBatch(tree.parents, tokens, target, law(tree.draft_probs))

    def prune(self, tree: TreeBatch) -> tuple[TreeBatch, list[int]]:
        """Row 0 of ``tree`` cut to the shape limits: nodes kept in order while their parent is kept
        and the node fits (children, depth, nodes), then :meth:`relabel`; and the kept nodes."""
        parents = tree.parents[0, : int(tree.num_nodes[0])].tolist()
        kept, new_index, depth, children = [0], {0: 0}, {0: 0}, {0: 0}
        for node in range(1, len(parents)):
            parent = parents[node]
            if parent not in new_index:
                continue
            if self.max_nodes is not None and len(kept) >= self.max_nodes:
                break
            if self.max_depth is not None and depth[parent] + 1 > self.max_depth:
                continue
            if self.max_children is not None and children[parent] >= self.max_children:
                continue
            new_index[node], depth[node], children[node] = len(kept), depth[parent] + 1, 0
            children[parent] += 1
            kept.append(node)
        if len(kept) < len(parents):
            nodes = torch.tensor(kept)
            new_parents = torch.tensor([[-1] + [new_index[parents[n]] for n in kept[1:]]])
            draft = None if tree.draft_probs is None else tree.draft_probs[:1, nodes]
            tree = TreeBatch(new_parents, tree.tokens[:1, nodes], tree.target_probs[:1, nodes], draft)
        return self.relabel(tree), kept

    def drafts_without_reserved(self, probs: torch.Tensor) -> torch.Tensor:
        """Draft rows with no mass on the reserved ids (renormalised; a row with nothing left is
        uniform on the other ids), so candidates drawn from them are never reserved."""
        columns = [t for t in self.reserved if t < probs.shape[-1]]
        if not columns:
            return probs
        out = probs.clone()
        out[..., columns] = 0.0
        mass = out.sum(-1, keepdim=True)
        fallback = torch.ones_like(out)
        fallback[..., columns] = 0.0
        out = torch.where(mass > 0, out, fallback)
        return out / out.sum(-1, keepdim=True)

    def free_near(self, token: int, vocab: int, taken: Sequence[int] = ()) -> int:
        """``token`` if it is not reserved (nor ``taken``), else the nearest id of ``[0, vocab)`` that is neither."""
        blocked = set(self.reserved) | set(taken)
        for step in range(vocab):
            for candidate in (token - step, token + step):
                if 0 <= candidate < vocab and candidate not in blocked:
                    return candidate
        raise ValueError(f"every token of V={vocab} is reserved or taken")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
