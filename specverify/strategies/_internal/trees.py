"""Tree cases: the fixed inputs of one tree verification step (``specverify._trees.contract.TreeBatch``).

Shapes engines use and the ones they break on: chains, stars, full binary trees, EAGLE-like static
trees (the best node of a level gets the most children), deep-narrow spines and wide-shallow fans,
and random trees; up to 64 candidates plus the root and up to 64 siblings (past the 32-sibling
boundary of a warp).  Siblings can be distinct (as EAGLE and SGLang assume), anything, or hold a
duplicate on purpose; a child can be made to carry a token of target probability 0 at its parent
(the coin-0 bug) or of draft probability 0.  Laws come from the pair kinds of
:mod:`.pairs`, so every edge case of the chain strategies appears at tree nodes too.

Everything is drawn by Hypothesis (sizes, parents, tokens, laws) and shrinks toward a small tree,
token 0 and simple numbers; no seed is drawn.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from hypothesis import strategies as st

from ..._trees.contract import TreeBatch
from .cases import MIXABLE_STEP_KINDS, MIXED, case_precision
from .pairs import PAIR_KINDS, pair_rows
from .vectors import draw_bytes, draw_positions, vocab_sizes

__all__ = ["MAX_SIBLINGS", "MAX_TREE_NODES", "SIBLING_KINDS", "TREE_SHAPES", "TreeCase", "tree_batches", "tree_cases"]

#: Tree shapes, simplest first (a failure shrinks toward the front of the list).
TREE_SHAPES = ("chain", "star", "binary", "eagle", "deep-narrow", "wide-shallow", "random")

#: How siblings' tokens relate: ``distinct`` (no two siblings share a token), ``any``, or
#: ``duplicates`` (some node with two or more children has two children with the same token).
SIBLING_KINDS = ("distinct", "any", "duplicates")

#: Largest tree: 64 candidates and the root.
MAX_TREE_NODES = 65
#: Most children of one node.
MAX_SIBLINGS = 64


@dataclasses.dataclass(frozen=True, eq=False)
class TreeCase:
    """One tree (a :class:`TreeBatch` of one row) and how it was made."""

    tree: TreeBatch
    shape: str
    siblings: str
    kind: str  # the pair kind of its laws
    precision: str = "float64"
    zero_child: int | None = None  # a child whose token has target probability 0 at its parent
    zero_draft_child: int | None = None  # a child whose token has draft probability 0 at its parent


def _check(shape: str, siblings: str, kind: str, max_nodes: int, max_siblings: int) -> None:
    if shape != MIXED and shape not in TREE_SHAPES:
        raise ValueError(f"unknown tree shape {shape!r}; choose one of {', '.join((*TREE_SHAPES, MIXED))}")
    if siblings not in SIBLING_KINDS:
        raise ValueError(f"unknown sibling kind {siblings!r}; choose one of {', '.join(SIBLING_KINDS)}")
    if kind != MIXED and kind not in PAIR_KINDS:
        raise ValueError(f"unknown pair kind {kind!r}; choose one of {', '.join((*PAIR_KINDS, MIXED))}")
    if not 2 <= max_nodes <= MAX_TREE_NODES:
        raise ValueError(f"max_nodes must lie in [2, {MAX_TREE_NODES}], got {max_nodes}")
    if not 1 <= max_siblings <= MAX_SIBLINGS:
        raise ValueError(f"max_siblings must lie in [1, {MAX_SIBLINGS}], got {max_siblings}")


# --- shapes ----------------------------------------------------------------------------------


def tree_parents(draw: st.DrawFn, shape: str, max_nodes: int, max_siblings: int) -> list[int]:
    """Parents of a tree of ``shape`` (node 0 the root, parents before children)."""
    cap = max_nodes - 1  # candidates besides the root
    if shape == "chain":
        return [-1, *range(draw(st.integers(1, cap)))]
    if shape == "star":
        return [-1] + [0] * draw(st.integers(1, min(cap, max_siblings)))
    if shape == "binary":
        arity = min(2, max_siblings)
        deepest = 1
        while _full_size(arity, deepest + 1) - 1 <= cap and deepest < cap:
            deepest += 1
        depth = draw(st.integers(1, deepest))
        return [-1] + [(i - 1) // arity for i in range(1, _full_size(arity, depth))]
    if shape == "eagle":
        return _eagle(draw, cap, max_siblings)
    if shape == "deep-narrow":
        parents, spine = [-1], 0
        length = draw(st.integers(1, cap))
        sides = draw_bytes(draw, (length,)) & 1  # one draw for every level's side leaf
        for level in range(length):
            if len(parents) > cap:
                break
            parents.append(spine)
            child = len(parents) - 1
            if max_siblings > 1 and len(parents) <= cap and sides[level]:
                parents.append(spine)  # a side leaf, tried after the spine
            spine = child
        return parents
    if shape == "wide-shallow":
        width = draw(st.integers(1, min(cap, max_siblings)))
        parents = [-1] + [0] * width
        for child in range(1, min(width, 4) + 1):  # the first children get grandchildren
            room = cap - (len(parents) - 1)
            if room <= 0:
                break
            parents += [child] * draw(st.integers(0, min(room, max_siblings)))
        return parents
    # random: each node picks an earlier parent with room for another child
    count = draw(st.integers(1, cap))
    parents, children = [-1], [0]
    for i in range(1, count + 1):
        parent = draw(st.integers(0, i - 1))
        if children[parent] >= max_siblings:
            parent = i - 1  # the newest node has no child yet
        parents.append(parent)
        children[parent] += 1
        children.append(0)
    return parents


def _full_size(arity: int, depth: int) -> int:
    return depth + 1 if arity == 1 else (arity ** (depth + 1) - 1) // (arity - 1)


def _eagle(draw: st.DrawFn, cap: int, max_siblings: int) -> list[int]:
    """A static tree like EAGLE's: per level, earlier (higher-scored) nodes get at least as many children."""
    parents, level = [-1], [0]
    while level and len(parents) - 1 < cap:
        next_level: list[int] = []
        most = min(max_siblings, cap - (len(parents) - 1))
        for node in level:
            room = cap - (len(parents) - 1)
            most = min(most, room)
            if most <= 0:
                break
            count = draw(st.integers(0 if next_level else 1, most))
            for _ in range(count):
                parents.append(node)
                next_level.append(len(parents) - 1)
            most = count
            if count == 0:
                break
        level = next_level
        if level and not draw(st.booleans()):
            break  # shrinks toward stopping after the first level
    return parents


# --- tokens and laws -------------------------------------------------------------------------


def _sibling_ranks(parents: list[int]) -> tuple[list[int], list[int]]:
    """Each node's rank among its siblings, and each node's first sibling."""
    seen: dict[int, int] = {}
    first: dict[int, int] = {}
    ranks, firsts = [0], [0]
    for node in range(1, len(parents)):
        parent = parents[node]
        ranks.append(seen.get(parent, 0))
        seen[parent] = ranks[-1] + 1
        firsts.append(first.setdefault(parent, node))
    return ranks, firsts


def _tokens(draw: st.DrawFn, parents: list[int], vocab: int, siblings: str) -> np.ndarray:
    raw = draw_positions(draw, len(parents), vocab)
    ranks, firsts = _sibling_ranks(parents)
    if siblings == "distinct":  # siblings count up from the first one's token: distinct while fewer than V
        tokens = np.array([(raw[firsts[i]] + ranks[i]) % vocab for i in range(len(parents))])
    else:
        tokens = raw.copy()
    if siblings == "duplicates":
        last_rank = {parents[i]: i for i in range(1, len(parents))}  # the last child of each parent
        for node in sorted(set(last_rank.values())):
            if ranks[node] >= 1:
                tokens[node] = tokens[firsts[node]]  # the last child repeats the first one
                break
    tokens[0] = 0
    return tokens.astype(np.int64)


def _most_siblings(parents: list[int]) -> int:
    counts: dict[int, int] = {}
    for parent in parents[1:]:
        counts[parent] = counts.get(parent, 0) + 1
    return max(counts.values(), default=1)


@st.composite
def _tree_case(
    draw: st.DrawFn,
    shape: str,
    siblings: str,
    kind: str,
    max_nodes: int,
    max_siblings: int,
    max_vocab: int,
    vocab: int | None,
    zero_children: bool | None,
    with_draft: bool,
    precision: str | None,
) -> TreeCase:
    if shape == MIXED:
        shape = draw(st.sampled_from(TREE_SHAPES))
    if vocab is not None and siblings == "distinct":
        max_siblings = min(max_siblings, vocab)
    parents = tree_parents(draw, shape, max_nodes, max_siblings)
    need = _most_siblings(parents) if siblings == "distinct" else 2
    if vocab is None:
        vocab = draw(vocab_sizes(max(2, need), max(max_vocab, need)))
    precision = case_precision(draw, kind, precision)
    pair_kind = draw(st.sampled_from(MIXABLE_STEP_KINDS)) if kind == MIXED else kind
    target, draft = pair_rows(draw, len(parents), vocab, pair_kind, precision)
    tokens = _tokens(draw, parents, vocab, siblings)
    zero_child = zero_draft_child = None
    if zero_children if zero_children is not None else draw(st.booleans()):
        zero_child = draw(st.integers(1, len(parents) - 1))
        row, token = parents[zero_child], tokens[zero_child]
        if (target[row] > 0).sum() > 1 or target[row, token] == 0:
            target[row, token] = 0.0  # the parent's law keeps other mass
        else:
            zero_child = None
        if with_draft and len(parents) > 2:
            zero_draft_child = draw(st.integers(1, len(parents) - 1))
            row, token = parents[zero_draft_child], tokens[zero_draft_child]
            if (draft[row] > 0).sum() > 1 or draft[row, token] == 0:
                draft[row, token] = 0.0
            else:
                zero_draft_child = None
    tree = TreeBatch(
        torch.tensor([parents], dtype=torch.int64),
        torch.from_numpy(tokens)[None],
        target[None],
        draft[None] if with_draft else None,
    )
    return TreeCase(tree, shape, siblings, pair_kind, precision, zero_child, zero_draft_child)


def tree_cases(
    *,
    shape: str = MIXED,
    siblings: str = "any",
    kind: str = "random",
    max_nodes: int = 16,
    max_siblings: int = MAX_SIBLINGS,
    max_vocab: int = 8,
    vocab_size: int | None = None,
    zero_children: bool | None = None,
    with_draft: bool = True,
    precision: str | None = None,
) -> st.SearchStrategy[TreeCase]:
    """One tree of candidates with its laws, as a :class:`TreeCase`.

    ``shape`` is one of :data:`TREE_SHAPES` or ``"mixed"``; ``siblings`` one of
    :data:`SIBLING_KINDS` (``distinct`` raises ``V`` to the most siblings of the tree); ``kind`` a
    pair kind of the laws (or ``"mixed"``); ``max_nodes`` counts the root (at most
    :data:`MAX_TREE_NODES`); ``zero_children`` forces (True), forbids (False) or draws (None) a child
    of target probability 0 and one of draft probability 0; ``with_draft=False`` leaves
    ``draft_probs`` out (the target-only verifier).  Shrinks toward a two-node chain.
    """
    _check(shape, siblings, kind, max_nodes, max_siblings)
    return _tree_case(
        shape, siblings, kind, max_nodes, max_siblings, max_vocab, vocab_size, zero_children, with_draft, precision
    )


def tree_batches(
    *,
    max_cases: int = 4,
    max_vocab: int = 8,
    shape: str = MIXED,
    siblings: str = "any",
    kind: str = "random",
    max_nodes: int = 16,
    max_siblings: int = MAX_SIBLINGS,
    zero_children: bool | None = None,
    with_draft: bool = True,
    precision: str | None = None,
) -> st.SearchStrategy[TreeBatch]:
    """Several tree cases of one ``V`` and one precision in one :class:`TreeBatch`, narrower trees
    padded (parent -2).  Takes :func:`tree_cases`' options but ``vocab_size``.  Shrinks toward one case."""
    if max_cases < 1:
        raise ValueError(f"max_cases must be at least 1, got {max_cases}")
    _check(shape, siblings, kind, max_nodes, max_siblings)
    return _tree_batches(
        max_cases, max_vocab, shape, siblings, kind, max_nodes, max_siblings, zero_children, with_draft, precision
    )


@st.composite
def _tree_batches(
    draw: st.DrawFn,
    max_cases: int,
    max_vocab: int,
    shape: str,
    siblings: str,
    kind: str,
    max_nodes: int,
    max_siblings: int,
    zero_children: bool | None,
    with_draft: bool,
    precision: str | None,
) -> TreeBatch:
    vocab = draw(vocab_sizes(2, max_vocab))
    precision = case_precision(draw, kind, precision)
    case = _tree_case(
        shape, siblings, kind, max_nodes, max_siblings, max_vocab, vocab, zero_children, with_draft, precision
    )
    cases = draw(st.lists(case, min_size=1, max_size=max_cases))
    return TreeBatch.concat([c.tree for c in cases])
