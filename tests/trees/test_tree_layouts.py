"""SGLang's and EAGLE's tree layouts to and from TreeBatch, on hand-built trees (EAGLE's per-parent
draft rows, Medusa and Sequoia: tests/trees/test_tree_real_layouts.py)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from specverify._trees.contract import TreeBatch
from specverify._trees.converters import from_sglang, sglang_arrays, to_sglang
from specverify._trees.paths import from_eagle, to_eagle
from specverify.samplers import tree_specinfer
from specverify.strategies._internal.trees import tree_cases

V = 16


def laws(batch: int, nodes: int) -> torch.Tensor:
    """A different law at every node, so a node mixed up with another shows."""
    g = torch.Generator().manual_seed(0)
    return torch.rand(batch, nodes, V, generator=g, dtype=torch.float64) + 0.01


def sglang_rows() -> dict[str, torch.Tensor]:
    """Row 0: root -> [3, 1] (3 tried first), 3 -> [5, 2], 1 -> [4].  Row 1: root -> 1 -> 2; 3, 4, 5 unused."""
    return {
        "candidates": torch.tensor([[7, 11, 12, 13, 14, 15], [7, 1, 2, 0, 0, 0]], dtype=torch.int32),
        "retrive_index": torch.tensor([[5, 0, 3, 1, 4, 2], [6, 7, 8, 9, 10, 11]], dtype=torch.int32),
        "retrive_next_token": torch.tensor([[3, 4, -1, 5, -1, -1], [1, 2, -1, -1, -1, -1]], dtype=torch.int32),
        "retrive_next_sibling": torch.tensor([[-1, -1, -1, 1, -1, 2], [-1, -1, -1, -1, -1, -1]], dtype=torch.int32),
        "target_probs": laws(2, 6),
    }


def test_from_sglang_renumbers_in_try_order() -> None:
    arrays = sglang_rows()
    layout = from_sglang(**arrays)
    tree = layout.tree
    assert layout.order.tolist() == [[0, 3, 1, 5, 2, 4], [0, 1, 2, -1, -1, -1]]
    assert tree.parents.tolist() == [[-1, 0, 0, 1, 1, 2], [-1, 0, 1, -2, -2, -2]]
    assert tree.tokens[0].tolist() == [7, 13, 11, 15, 12, 14]
    assert tree.tokens[1, :3].tolist() == [7, 1, 2]
    for n, local in enumerate(layout.order[0].tolist()):
        assert torch.equal(tree.target_probs[0, n], arrays["target_probs"][0, local])
    assert tree.depth == 2


def test_sglang_outputs_round_trip() -> None:
    layout = from_sglang(**sglang_rows())
    path = torch.tensor([[0, 1, 4], [0, 1, -1]])  # row 0: root -> local 3 -> local 2
    token = torch.tensor([9, 4])
    predicts, accept_index, accept_token_num = layout.from_path(path, token)
    assert accept_index.tolist() == [[5, 1, 3], [6, 7, -1]]  # retrive_index of local 0, 3, 2; of 0, 1
    assert accept_token_num.tolist() == [2, 1]
    assert predicts[5] == 13 and predicts[1] == 12 and predicts[3] == 9  # each accepted node: what follows it
    assert predicts[6] == 1 and predicts[7] == 4
    back = layout.to_path(predicts, accept_index, accept_token_num)
    assert torch.equal(back[0], path) and torch.equal(back[1], token)


def test_sglang_output_naming_no_node_is_kept_visible() -> None:
    layout = from_sglang(**sglang_rows())
    predicts, accept_index, count = layout.empty_outputs()
    accept_index[:, 0] = torch.tensor([5, 6], dtype=torch.int32)
    accept_index[0, 1] = 99  # no node has flat index 99
    count[0] = 1
    path, _ = layout.to_path(predicts, accept_index, count)
    assert path.tolist() == [[0, 6, -1], [0, -1, -1]]  # node 6 is out of range: the audit reports it


def test_sglang_layout_round_trip() -> None:
    parents = torch.tensor([[-1, 0, 0, 0, 1, 1, 3, 6], [-1, 0, 1, 1, 0, -2, -2, -2]])
    tokens = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7], [0, 3, 3, 2, 1, -1, -1, -1]])
    tree = TreeBatch(parents, tokens, laws(2, 8), laws(2, 8))
    layout = to_sglang(tree)
    arrays = sglang_arrays(layout)
    assert arrays["retrive_next_token"][0].tolist() == [1, 4, -1, 6, -1, -1, 7, -1]
    assert arrays["retrive_next_sibling"][0].tolist() == [-1, 2, 3, -1, 5, -1, -1, -1]
    again = from_sglang(**arrays).tree  # already numbered as TreeBatch requires: numbering kept
    assert torch.equal(again.parents, tree.parents)
    for field in ("target_probs", "draft_probs"):  # padding nodes' laws are not read
        assert torch.equal(getattr(again, field)[tree.real], getattr(tree, field)[tree.real])
    assert torch.equal(torch.where(tree.real, again.tokens, -1), torch.where(tree.real, tree.tokens, -1))


def test_sglang_malformed_links_are_refused() -> None:
    arrays = sglang_rows()
    arrays["retrive_next_sibling"] = arrays["retrive_next_sibling"].clone()
    arrays["retrive_next_sibling"][0, 2] = 1  # 1 -> ... -> 2 -> 1: a sibling cycle lists a node twice
    with pytest.raises(ValueError, match="SGLang layout"):
        from_sglang(**arrays)


def eagle_indices() -> torch.Tensor:
    """root -> [2, 1] (2 first appears first), 1 -> [4, 3]."""
    return torch.tensor([[0, 2, -1], [0, 1, 4], [0, 1, 3]])


def test_from_eagle_orders_children_by_first_appearance() -> None:
    tokens = torch.tensor([[5, 6, 7, 8, 9], [1, 2, 3, 4, 5]])
    target = laws(2, 5)
    layout = from_eagle(eagle_indices(), tokens, target)
    assert layout.order.tolist() == [[0, 2, 1, 4, 3]] * 2
    assert layout.tree.parents.tolist() == [[-1, 0, 0, 2, 2]] * 2
    assert layout.tree.tokens[0].tolist() == [5, 7, 6, 9, 8]
    assert torch.equal(layout.tree.target_probs[:, 1], target[:, 2])
    assert layout.retrieve_indices.tolist() == [[[0, 1, -1], [0, 2, 3], [0, 2, 4]]] * 2
    assert torch.equal(to_eagle(layout.tree).retrieve_indices, layout.retrieve_indices)


def test_eagle_outputs_round_trip() -> None:
    layout = from_eagle(eagle_indices(), torch.tensor([[5, 6, 7, 8, 9]] * 3), laws(3, 5))
    path = layout.to_path(torch.tensor([1, 0, 2]), torch.tensor([2, 0, 1]))
    assert path.tolist() == [[0, 2, 3], [0, -1, -1], [0, 2, -1]]
    best, length = layout.from_path(path)
    assert best.tolist() == [1, 0, 1] and length.tolist() == [2, 0, 1]
    assert torch.equal(layout.to_path(best, length), path)
    with pytest.raises(ValueError, match="no prefix"):
        layout.from_path(torch.tensor([[0, 3, -1]]))


def test_eagle_conflicting_parents_are_refused() -> None:
    with pytest.raises(ValueError, match="two different parents"):
        from_eagle(torch.tensor([[0, 1, 2], [0, 3, 2]]), torch.zeros(1, 4, dtype=torch.int64), laws(1, 4))


@settings(max_examples=25)
@given(tree_cases(max_nodes=20, kind="mixed"))
def test_layouts_round_trip_on_generated_trees(case) -> None:  # type: ignore[no-untyped-def]
    """Any tree through SGLang's and EAGLE's layouts and back, with a sampler's output translated both ways."""
    tree = case.tree
    path, token = tree_specinfer(tree, torch.Generator().manual_seed(0))
    layout = to_sglang(tree)
    again = from_sglang(**sglang_arrays(layout))
    assert torch.equal(again.tree.parents, tree.parents) and torch.equal(again.tree.target_probs, tree.target_probs)
    back = again.to_path(*layout.from_path(path, token))
    assert torch.equal(back[0], path) and torch.equal(back[1], token)
    eagle = from_eagle(to_eagle(tree).retrieve_indices, tree.tokens, tree.target_probs, tree.draft_probs)
    assert torch.equal(eagle.tree.parents, tree.parents) and torch.equal(eagle.tree.tokens, tree.tokens)
    assert torch.equal(eagle.to_path(*eagle.from_path(path)), path)
