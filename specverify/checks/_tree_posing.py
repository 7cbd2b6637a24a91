"""Posing the ``trees`` family's trees within a tree sampler's declared limits (``max_children``,
``max_depth``, ``max_nodes``, ``reserved_tokens``: :class:`~specverify._trees.limits.TreeLimits`).

A check says which trees it poses (``TreeCheck.posed``: what, parents, ``V``, whether siblings are
drawn distinct); those the limits exclude are not posed, and the check's message, its evidence
(``not_posed``) and the run's record (``run.not_posed``) say which and why.  The trees it does pose
are given as the sampler takes them: fixed trees with any reserved candidate renamed
(:func:`fixed_within`), generated ones cut to the limits (:func:`generated_within`), models whose
drafts give reserved ids no mass (:func:`model_drafts`).  With no limits declared each is the identity.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .._calling.sut import SamplerUnderTest
from .._trees.contract import TreeBatch
from .._trees.limits import TreeLimits
from ._tree_cases import (
    AUDIT_ONLY,
    BLOCK,
    CONDITIONAL_KINDS,
    PRODUCTION_PARENTS,
    TREE_SHAPES,
    WITHOUT_REPLACEMENT,
    fixed_tree,
    posed_parents,
)

__all__ = ["NOT_POSED", "Posed", "drawn_posed", "fixed_posed", "fixed_within", "generated_within", "model_drafts"]

#: A tree a check poses: what it is in words, its parents, ``V``, and whether its siblings are drawn distinct.
Posed = tuple[str, tuple[int, ...], int, bool]

#: How a check names the trees the sampler's declared limits kept it from posing.
NOT_POSED = "not posed, beyond the sampler's declared tree limits"


def fixed_within(sut: SamplerUnderTest, kind: str, seed: int) -> TreeBatch:
    """:func:`fixed_tree` as the sampler takes it: no reserved id a candidate (renamed, the same case)."""
    return sut.tree_limits.relabel(fixed_tree(kind, seed, sut.algorithm))


def fixed_posed(kind: str, algorithm: str | None, *, distinct: bool = False) -> Posed:
    """The fixed tree of ``kind`` a check poses (:func:`fixed_tree`), as :data:`Posed`."""
    parents = posed_parents(kind, algorithm)
    shape = (
        TREE_SHAPES[CONDITIONAL_KINDS[kind]]
        if kind in CONDITIONAL_KINDS
        else AUDIT_ONLY.get(kind, TREE_SHAPES["binary"])
    )
    return f"the {kind} tree ({len(parents) - 1} candidates)", parents, shape.vocab, distinct


def drawn_posed(case: str, algorithm: str | None) -> list[Posed]:
    """The tree a check drawing its candidates from a model poses at ``case`` (a shape or ``V=<n>``)."""
    distinct = algorithm == WITHOUT_REPLACEMENT
    if case in TREE_SHAPES:
        shape = TREE_SHAPES[case]
        parents = shape.parents if algorithm != BLOCK else tuple(range(-1, shape.nodes - 1))
        return [(f"the {case} tree ({len(parents) - 1} candidates drawn)", parents, shape.vocab, distinct)]
    return [(f"the tree at {case} (3 candidates drawn)", PRODUCTION_PARENTS, int(case[2:]), distinct)]


def model_drafts(sut: SamplerUnderTest, draft_table: torch.Tensor) -> torch.Tensor:
    """A model's draft table with no mass on the sampler's reserved ids: drawn candidates never are."""
    return sut.tree_limits.drafts_without_reserved(draft_table)


def generated_within(case: Any, limits: TreeLimits) -> Any:
    """A generated case within the sampler's declared limits (:meth:`TreeLimits.prune`): the same
    case where it already fits, so a sampler that declares none is posed exactly what it was."""
    if not limits.declared:
        return case
    tree, kept = limits.prune(case.tree)
    if tree is case.tree:
        return case
    where = {node: i for i, node in enumerate(kept)}
    return dataclasses.replace(
        case, tree=tree, zero_child=where.get(case.zero_child), zero_draft_child=where.get(case.zero_draft_child)
    )
