"""The tree step contract: a tree of candidate tokens per row, the accepted path and the token after it.

A tree sampler is any callable

    tree_sampler(tree: TreeBatch, generator, *, uniforms=None) -> (path, token)

``tree`` holds, per row ``b``, a tree of ``N`` candidate nodes (:class:`TreeBatch`): node 0 is the
root (the last committed token), every other node has a parent of smaller index, and the children
of a node are tried in increasing node index.  The sampler returns

* ``path [B, D+1]`` int64: the accepted nodes from the root (``path[:, 0] == 0``), then ``-1``
  padding; ``D`` is :attr:`TreeBatch.depth`, the deepest node of the batch;
* ``token [B]`` int64: the token emitted after the path's last node (the replacement drawn from a
  residual, or the bonus drawn from the target at a leaf).

Row ``b`` emits ``tokens[b, path[b, 1:]]`` and then ``token[b]``.  Padding nodes (rows with fewer
nodes than ``N``) are marked by parent ``-2`` and form a suffix of the row; their tokens and laws are
ignored.  A chain of ``K`` drafts is the path tree of ``K + 1`` nodes (:meth:`TreeBatch.from_chain`,
:func:`chain_output`, :func:`as_chain_sampler`), so every chain sampler has a tree form and back.

:func:`audit_tree_output` checks an output exactly (no statistics) and returns the rules it breaks as
:class:`~specverify._contract.Violation`, like the chain audit.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from .._contract import Capabilities, Violation, malformed_pair
from .._laws.oracle import assemble

__all__ = [
    "ALGORITHMS",
    "PADDING",
    "TreeBatch",
    "as_chain_sampler",
    "audit_tree_output",
    "chain_output",
    "last_nodes",
    "rows_of",
]

#: The lossless verification algorithms with an exact law here (see ``specverify._trees.exact``).
ALGORITHMS = ("specinfer", "without-replacement", "target-only", "block-verification")

#: The parent index that marks a padding node.
PADDING = -2


@dataclasses.dataclass(frozen=True, eq=False)
class TreeBatch:
    """One verification step's trees of candidates, one tree per row (see the module docstring).

    Attributes:
        parents: ``[B, N]`` int64; ``parents[:, 0] == -1``; ``0 <= parents[b, i] < i`` for a real
            node, :data:`PADDING` (-2) for a padding node (padding is a suffix of the row).
        tokens: ``[B, N]`` int64, the candidate token at each node; the root's is not read.
        target_probs: ``[B, N, V]``: the target law after the path to each node, that is the law
            of the token that *follows* the node.  Rows need not sum to 1 (divided by their sum).
        draft_probs: ``[B, N, V]`` or ``None``: the law each node's children were drawn from (read
            only at nodes with children; a leaf's row may be zeros).
    """

    parents: torch.Tensor
    tokens: torch.Tensor
    target_probs: torch.Tensor
    draft_probs: torch.Tensor | None = None

    def __post_init__(self) -> None:
        _validate(self)

    # --- sizes -------------------------------------------------------------------------------

    @property
    def batch(self) -> int:
        return self.parents.shape[0]

    @property
    def width(self) -> int:
        """``N``, nodes per row including padding."""
        return self.parents.shape[1]

    @property
    def vocab(self) -> int:
        return self.target_probs.shape[-1]

    @functools.cached_property
    def real(self) -> torch.Tensor:
        """``[B, N]`` bool: the node is not padding."""
        return self.parents != PADDING

    @functools.cached_property
    def num_nodes(self) -> torch.Tensor:
        """``[B]``: real nodes per row (the root included)."""
        return self.real.sum(dim=1)

    # --- structure ---------------------------------------------------------------------------

    @functools.cached_property
    def node_depth(self) -> torch.Tensor:
        """``[B, N]``: the root is at depth 0, a child one deeper than its parent; padding -1."""
        depth = torch.zeros_like(self.parents)
        for i in range(1, self.width):  # parents precede children: one pass in node order
            parent = self.parents[:, i].clamp_min(0)
            depth[:, i] = depth.gather(1, parent[:, None]).squeeze(1) + 1
        return torch.where(self.real, depth, -1)

    @functools.cached_property
    def depth(self) -> int:
        """``D``, the deepest node of the batch: a path has at most ``D + 1`` nodes."""
        return int(self.node_depth.max())

    @functools.cached_property
    def sibling_rank(self) -> torch.Tensor:
        """``[B, N]``: how many earlier siblings a node has (its place in the try order); root 0."""
        rank = torch.zeros_like(self.parents)
        for i in range(2, self.width):  # O(B N) memory: no [B, N, N] comparison
            rank[:, i] = (self.parents[:, 1:i] == self.parents[:, i : i + 1]).sum(dim=1)
        return torch.where(self.real, rank, 0)

    @functools.cached_property
    def children(self) -> torch.Tensor:
        """``[B, N, R]``: ``children[b, n, r]`` is the ``r``-th child of node ``n`` tried, or -1."""
        child = self.real.clone()
        child[:, 0] = False
        rank = self.sibling_rank
        width = int(rank[child].max()) + 1 if child.any() else 1
        table = torch.full((self.batch, self.width, width), -1, dtype=torch.int64, device=self.parents.device)
        b, i = child.nonzero(as_tuple=True)
        table[b, self.parents[b, i], rank[b, i]] = i
        return table

    @functools.cached_property
    def is_chain(self) -> bool:
        """Every row is a path tree: node ``i`` is the child of node ``i - 1``."""
        expected = torch.arange(-1, self.width - 1, device=self.parents.device).expand_as(self.parents)
        return bool(((self.parents == expected) | ~self.real).all())

    # --- chains ------------------------------------------------------------------------------

    @classmethod
    def from_chain(
        cls, target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor
    ) -> TreeBatch:
        """The chain contract's inputs as path trees: node ``i`` is draft ``i`` (node 0 the root).

        ``target_probs [B, K+1, V]`` is already one law per node; ``draft_probs [B, K, V]`` gets a
        zero row for the leaf, which has no children.
        """
        batch, k = draft_tokens.shape
        parents = torch.arange(-1, k, device=draft_tokens.device).expand(batch, k + 1).clone()
        root = torch.full((batch, 1), -1, dtype=torch.int64, device=draft_tokens.device)
        tokens = torch.cat([root, draft_tokens.to(torch.int64)], dim=1)
        if draft_probs is not None:
            draft_probs = torch.cat([draft_probs, draft_probs.new_zeros(batch, 1, draft_probs.shape[-1])], dim=1)
        return cls(parents, tokens, target_probs, draft_probs)

    @classmethod
    def concat(cls, trees: list[TreeBatch]) -> TreeBatch:
        """Rows of several batches in one (same ``V``), narrower trees padded with padding nodes."""
        width = max(t.width for t in trees)

        def pad(x: torch.Tensor, value: float) -> torch.Tensor:
            extra = width - x.shape[1]
            return torch.cat([x, x.new_full((x.shape[0], extra, *x.shape[2:]), value)], dim=1) if extra else x

        drafts = [t.draft_probs for t in trees]
        if any(d is None for d in drafts) and not all(d is None for d in drafts):
            raise ValueError("TreeBatch.concat: some batches have draft_probs and some do not")
        return cls(
            torch.cat([pad(t.parents, PADDING) for t in trees]),
            torch.cat([pad(t.tokens, -1) for t in trees]),
            torch.cat([pad(t.target_probs, 0.0) for t in trees]),
            None
            if drafts[0] is None
            else torch.cat([pad(d, 0.0) for d in drafts if d is not None]),  # all or none (above)
        )

    def path_tokens(self, path: torch.Tensor) -> torch.Tensor:
        """``[B, D]``: the tokens of the accepted nodes after the root, -1 padded."""
        steps = path[:, 1:]
        return torch.where(steps >= 0, self.tokens.gather(1, steps.clamp_min(0)), -1)


def chain_output(tree: TreeBatch, path: torch.Tensor, token: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A tree output on a path tree (:meth:`TreeBatch.from_chain`) as the chain contract's
    ``(tokens [B, K+1], num_accepted [B])``."""
    if not tree.is_chain:
        raise ValueError("chain_output needs a path tree (TreeBatch.from_chain)")
    num_accepted = (path >= 0).sum(dim=1) - 1
    return assemble(tree.tokens[:, 1:], num_accepted, token)


def as_chain_sampler(
    tree_sampler: Callable[..., Any], *, name: str | None = None, canonical: bool | None = None
) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A tree sampler as a chain-contract sampler (``specverify.check`` runs it).

    Chain uniforms ``[B, K+1]`` map to tree uniforms (node ``i``'s coin is chain ``u[:, i-1]``, the
    emission coin chain ``u[:, K]``), so a tree sampler that declares ``uniforms`` keeps them.
    ``canonical`` defaults to whether the tree algorithm is the canonical token-wise one on a chain
    (SpecInfer and the without-replacement verifier are; block verification and the target-only
    verifier are lossless but not canonical).
    """
    algorithm = getattr(tree_sampler, "algorithm", None)
    if canonical is None:
        canonical = algorithm in ("specinfer", "without-replacement")
    uniforms_ok = getattr(getattr(tree_sampler, "capabilities", None), "uniforms", False)

    def chain_sampler(
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        uniforms: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        tree = TreeBatch.from_chain(target_probs, draft_probs, draft_tokens)
        kwargs: dict[str, torch.Tensor] = {}
        if uniforms is not None:
            kwargs["uniforms"] = torch.cat([uniforms[:, -1:], uniforms[:, :-1]], dim=1)
        path, token = tree_sampler(tree, generator, **kwargs)
        return chain_output(tree, path, token)

    chain_sampler.name = name or f"{getattr(tree_sampler, 'name', 'tree')}.as_chain"  # type: ignore[attr-defined]
    chain_sampler.algorithm = algorithm  # type: ignore[attr-defined]
    chain_sampler.capabilities = Capabilities(uniforms=uniforms_ok, canonical=canonical)  # type: ignore[attr-defined]
    return chain_sampler


# --- validation ------------------------------------------------------------------------------


def _validate(tree: TreeBatch) -> None:
    parents, tokens, target, draft = tree.parents, tree.tokens, tree.target_probs, tree.draft_probs
    for name, value in (("parents", parents), ("tokens", tokens)):
        if not isinstance(value, torch.Tensor) or value.dtype != torch.int64 or value.dim() != 2:
            raise ValueError(f"TreeBatch.{name} must be an int64 tensor [B, N], got {_describe(value)}")
    batch, width = parents.shape
    if width < 1 or tokens.shape != parents.shape:
        raise ValueError(
            f"TreeBatch.tokens has shape {tuple(tokens.shape)}, parents {tuple(parents.shape)}: need the same [B, N], "
            "N >= 1"
        )
    laws: tuple[tuple[str, torch.Tensor | None], ...] = (("target_probs", target), ("draft_probs", draft))
    for name, law in laws:
        if law is None and name == "draft_probs":
            continue
        if not isinstance(law, torch.Tensor) or not law.is_floating_point() or law.dim() != 3:
            raise ValueError(f"TreeBatch.{name} must be a float tensor [B, N, V], got {_describe(law)}")
        if law.shape[:2] != parents.shape or law.shape[2] < 1:
            raise ValueError(f"TreeBatch.{name} has shape {tuple(law.shape)}, expected [{batch}, {width}, V]")
    if draft is not None and draft.shape != target.shape:
        raise ValueError(f"TreeBatch.draft_probs has shape {tuple(draft.shape)}, target_probs {tuple(target.shape)}")
    vocab = target.shape[2]

    def fail(mask: torch.Tensor, what: Callable[[int, int], str]) -> None:
        bad = mask.nonzero()
        if bad.numel():
            b, i = (int(x) for x in bad[0])
            raise ValueError(f"TreeBatch row {b}, node {i}: {what(b, i)}")

    fail(parents[:, :1] != -1, lambda b, i: f"the root's parent is {int(parents[b, 0])}, expected -1")
    real = parents != PADDING
    fail(
        torch.cat([real[:, :1] & False, real[:, 1:] & ~real[:, :-1]], dim=1),
        lambda b, i: "a real node after a padding node (padding must be a suffix)",
    )
    index = torch.arange(width, device=parents.device)
    bad_parent = real & (index > 0) & ((parents < 0) | (parents >= index))
    fail(bad_parent, lambda b, i: f"parent {int(parents[b, i])} is not an earlier node (need 0 <= parent < {i})")
    bad_token = real & (index > 0) & ((tokens < 0) | (tokens >= vocab))
    fail(bad_token, lambda b, i: f"token {int(tokens[b, i])} is outside [0, {vocab})")
    _check_rows(target, real, "target_probs", fail)
    if draft is not None:
        has_child = torch.zeros_like(real)
        child = real & (index > 0)
        has_child[child.nonzero(as_tuple=True)[0], parents[child]] = True
        _check_rows(draft, has_child, "draft_probs", fail, nonnegative_only=real)


def _check_rows(
    probs: torch.Tensor,
    used: torch.Tensor,
    name: str,
    fail: Callable[..., None],
    nonnegative_only: torch.Tensor | None = None,
) -> None:
    checked = used if nonnegative_only is None else nonnegative_only
    low, high = torch.aminmax(probs) if probs.numel() else (torch.zeros(()), torch.zeros(()))
    if not (bool(low >= 0) and bool(high < torch.inf)):  # one pass where every entry is fine (a NaN is not)
        fail(
            checked & ~(probs.isfinite() & (probs >= 0)).all(dim=-1),
            lambda b, i: f"{name} has a negative or non-finite entry",
        )
    fail(used & ~(probs.sum(dim=-1) > 0), lambda b, i: f"{name} sums to 0 where it is read")


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


# --- the exact audit of an output ------------------------------------------------------------


def last_nodes(path: torch.Tensor) -> torch.Tensor:
    """``[B]``: the node each path (``-1`` padded past its end) ends at."""
    return path.gather(1, (path >= 0).sum(dim=1, keepdim=True) - 1).squeeze(1)


def rows_of(tree: TreeBatch, rows: slice) -> TreeBatch:
    """Rows ``rows`` of a batch, trailing all-padding columns kept (the width is the batch's)."""
    if rows.start in (0, None) and (rows.stop is None or rows.stop >= tree.batch):
        return tree
    draft = None if tree.draft_probs is None else tree.draft_probs[rows]
    return TreeBatch(tree.parents[rows], tree.tokens[rows], tree.target_probs[rows], draft)


def audit_tree_output(tree: TreeBatch, output: Any, *, first_only: bool = False) -> list[Violation]:
    """Every contract rule a tree sampler's output breaks (exact; no statistics).

    Rules: ``shape-dtype``; ``path-root`` (a path starts at node 0); ``path-padding`` (-1 only after
    the path); ``path-range`` (nodes are real nodes of the row); ``path-edge`` (each node is a child
    of the one before); ``no-token`` (a negative token: no token emitted after the path, e.g. none
    drawn after a leaf); ``token-range``; ``zero-target`` (finding ``support``): an accepted node whose
    token has target probability 0 at its parent, or an emitted token of probability 0 at the last node.
    """
    batch, depth, vocab = tree.batch, tree.depth, tree.vocab
    problems = malformed_pair(output, (("path", (batch, depth + 1)), ("token", (batch,))))
    if problems:
        return problems[:1] if first_only else problems
    path, token = (x.to(tree.parents.device) for x in output)
    checks: list[tuple[str, torch.Tensor, Callable[[int], str], str]] = []
    gap = (path[:, :-1] == -1) & (path[:, 1:] != -1)
    checks.append(
        (
            "path-root",
            path[:, 0] != 0,
            lambda r: f"row {r}: the path starts at node {int(path[r, 0])}, not the root 0",
            "contract",
        )
    )
    checks.append(
        (
            "path-padding",
            gap.any(-1),
            lambda r: f"row {r}: path {path[r].tolist()} has a node after -1 padding",
            "contract",
        )
    )
    out_of_range = (path < -1) | (path >= tree.num_nodes[:, None])
    checks.append(
        (
            "path-range",
            out_of_range.any(-1),
            lambda r: (
                f"row {r}: path node {_first(path[r], out_of_range[r])} is not one of the row's "
                f"{int(tree.num_nodes[r])} nodes"
            ),
            "contract",
        )
    )
    if not out_of_range.any():
        steps = path[:, 1:]
        taken = steps >= 0
        parent_of = tree.parents.gather(1, steps.clamp_min(0))
        broken = taken & (parent_of != path[:, :-1])
        checks.append(
            (
                "path-edge",
                broken.any(-1),
                lambda r: (
                    f"row {r}: path {path[r].tolist()} steps to node {_first(steps[r], broken[r])}, which is not a "
                    "child of the node before it"
                ),
                "contract",
            )
        )
        no_token = token < 0
        checks.append(
            (
                "no-token",
                no_token,
                lambda r: (
                    f"row {r}: emitted no token (token {int(token[r])}) after path {path[r][path[r] >= 0].tolist()}: a "
                    "verifier emits one token after the accepted path, the target's bonus or residual draw"
                ),
                "contract",
            )
        )
        bad_token = token >= vocab
        checks.append(
            (
                "token-range",
                bad_token,
                lambda r: f"row {r}: emitted token {int(token[r])} is outside [0, {vocab})",
                "contract",
            )
        )
        bad_token = bad_token | no_token
        if not broken.any() and not bad_token.any():
            rows = torch.arange(batch, device=path.device)
            last = path.gather(1, (path >= 0).sum(dim=1, keepdim=True) - 1).squeeze(1)
            emitted_zero = tree.target_probs[rows, last, token] == 0
            node_tokens = torch.where(taken, tree.tokens.gather(1, steps.clamp_min(0)), 0)
            at_parent = tree.target_probs[rows[:, None], path[:, :-1].clamp_min(0), node_tokens]
            accepted_zero = taken & (at_parent == 0)
            checks.append(
                (
                    "zero-target",
                    accepted_zero.any(-1),
                    lambda r: (
                        f"row {r}: accepted node {_first(steps[r], accepted_zero[r])} holds token "
                        f"{_first(node_tokens[r], accepted_zero[r])}, of target probability 0 at its parent"
                    ),
                    "support",
                )
            )
            checks.append(
                (
                    "zero-target",
                    emitted_zero,
                    lambda r: (
                        f"row {r}: emitted token {int(token[r])} after node {int(last[r])}, where the target "
                        "probability is 0"
                    ),
                    "support",
                )
            )
    violations = []
    for rule, mask, describe, finding in checks:
        bad = mask.nonzero()
        if bad.numel():
            row = int(bad[0, 0])
            violations.append(Violation(rule, describe(row), finding, row))
            if first_only:
                break
    return violations


def _first(values: torch.Tensor, mask: torch.Tensor) -> int:
    return int(values[mask][0])
