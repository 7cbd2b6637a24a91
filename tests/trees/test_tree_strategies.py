"""Tree strategies: every shape valid and within bounds, the edge cases reachable, and the
reference samplers' outputs audit clean and their laws normalised on generated trees."""

from __future__ import annotations

import pytest
import torch
from hypothesis import find, given, settings
from hypothesis import strategies as st

from specverify._trees.contract import audit_tree_output
from specverify._trees.exact import tree_law
from specverify.samplers import TREE_REFERENCES
from specverify.strategies._internal.trees import MAX_TREE_NODES, TREE_SHAPES, TreeCase, tree_batches, tree_cases


def most_siblings(case: TreeCase) -> int:
    return int(case.tree.sibling_rank.max()) + 1


def has_duplicate_siblings(case: TreeCase) -> bool:
    parents, tokens = case.tree.parents[0].tolist(), case.tree.tokens[0].tolist()
    pairs = [(parents[i], tokens[i]) for i in range(1, len(parents))]
    return len(set(pairs)) < len(pairs)


@pytest.mark.parametrize("shape", TREE_SHAPES)
@settings(max_examples=15)
@given(data=st.data())
def test_every_shape_is_a_valid_tree_within_bounds(shape: str, data) -> None:  # type: ignore[no-untyped-def]
    case = data.draw(tree_cases(shape=shape, max_nodes=MAX_TREE_NODES, siblings="distinct"))
    tree = case.tree
    assert case.shape == shape and 2 <= tree.width <= MAX_TREE_NODES
    assert not has_duplicate_siblings(case)
    assert most_siblings(case) <= 64
    if shape == "chain":
        assert tree.is_chain
    if shape in ("star", "wide-shallow"):
        assert tree.depth <= (1 if shape == "star" else 2)
    if shape == "binary":
        assert most_siblings(case) <= 2 and tree.width == 2 ** (tree.depth + 1) - 1
    if shape == "deep-narrow":
        assert most_siblings(case) <= 2 and tree.depth >= (tree.width - 1) // 2


def test_edge_cases_are_reachable() -> None:
    """Past the 32-sibling boundary, 64 siblings, deep trees, duplicates, zero-mass children."""
    wide = find(tree_cases(shape="star", max_nodes=MAX_TREE_NODES), lambda c: most_siblings(c) > 32)
    assert most_siblings(wide) == 33  # shrunk to the boundary
    full = find(
        tree_cases(shape="star", max_nodes=MAX_TREE_NODES, siblings="distinct"), lambda c: most_siblings(c) == 64
    )
    assert full.tree.vocab >= 64 and not has_duplicate_siblings(full)
    deep = find(tree_cases(shape="deep-narrow", max_nodes=MAX_TREE_NODES), lambda c: c.tree.depth >= 40)
    assert deep.tree.depth == 40
    dup = find(tree_cases(siblings="duplicates"), has_duplicate_siblings)
    assert dup.tree.width == 3  # the smallest tree with two siblings
    eagle = find(tree_cases(shape="eagle"), lambda c: c.tree.depth >= 2 and most_siblings(c) >= 3)
    assert eagle.tree.depth >= 2

    def zero_mass_child(c: TreeCase) -> bool:
        node = c.zero_child
        if node is None:
            return False
        parent = int(c.tree.parents[0, node])
        return bool(c.tree.target_probs[0, parent, c.tree.tokens[0, node]] == 0)

    assert find(tree_cases(zero_children=True), zero_mass_child).zero_child is not None


@settings(max_examples=25)
@given(tree_batches(max_cases=3, max_nodes=12, kind="mixed"))
def test_references_on_generated_trees(tree) -> None:  # type: ignore[no-untyped-def]
    """Valid outputs (no zero-mass token accepted or emitted) and laws summing to 1 on any tree."""
    generator = torch.Generator().manual_seed(0)
    for algorithm in ("specinfer", "without-replacement", "target-only"):
        law = tree_law(tree, algorithm)
        assert torch.allclose(law.sum(dim=(1, 2)), torch.ones(tree.batch, dtype=torch.float64))
        out = TREE_REFERENCES[algorithm](tree, generator)
        assert audit_tree_output(tree, out) == [], algorithm
        path, token = out
        last = path.gather(1, ((path >= 0).sum(1, keepdim=True) - 1))
        assert (law[torch.arange(tree.batch)[:, None], last, token[:, None]] > 0).all()  # a possible outcome


def test_unknown_options_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown tree shape"):
        tree_cases(shape="ring")
    with pytest.raises(ValueError, match="max_nodes"):
        tree_cases(max_nodes=100)
    with pytest.raises(ValueError, match="unknown sibling kind"):
        tree_cases(siblings="twins")
    with pytest.raises(TypeError, match="vocab_size"):
        tree_batches(vocab_size=4)  # type: ignore[call-arg]  # the one tree_cases option it does not take


@settings(max_examples=5)
@given(tree_batches(max_cases=3, with_draft=False, shape="star", precision="float16"))
def test_tree_batches_pass_their_options_to_every_case(batch) -> None:  # type: ignore[no-untyped-def]
    assert batch.draft_probs is None
    assert (batch.parents[:, 1:] <= 0).all()  # stars: every real node hangs from the root (padding -2)
    target = batch.target_probs
    assert torch.equal(target, target.to(torch.float16).to(torch.float64))
