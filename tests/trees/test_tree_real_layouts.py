"""EAGLE's, Medusa's and Sequoia's layouts to and from TreeBatch: generated trees there and back,
buffers built as the projects build them, and malformed inputs refused with a clear message."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from specverify import trees
from specverify.samplers import tree_specinfer
from specverify.strategies._internal.trees import tree_batches

V = 16
#: A tree as EAGLE's and Medusa's ``tree_choices`` / ``medusa_choices`` name it: each node is the
#: list of top-k ranks from the root.  Root -> [0, 1, 2]; 0 -> [0, 1]; 1 -> [0]; (0, 0) -> [0].
CHOICES = [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0]]


def laws(batch: int, nodes: int, seed: int = 0) -> torch.Tensor:
    """A different law at every node, so a node mixed up with another shows."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, nodes, V, generator=g, dtype=torch.float64) + 0.01


def choice_buffers(choices: list[list[int]]) -> dict[str, torch.Tensor]:
    """The buffers ``generate_tree_buffers`` / ``generate_medusa_buffers`` make from choices, from
    their semantics: nodes sorted by (depth, ranks), node ``k + 1`` is choice ``k``; a leaf row per
    choice no other extends; EAGLE sorts the rows, Medusa lists them from the last choice back."""
    ordered = sorted(choices, key=lambda c: (len(c), c))
    node = {tuple(c): k + 1 for k, c in enumerate(ordered)}
    width, depth = len(ordered) + 1, max(len(c) for c in ordered)
    mask = torch.eye(width)
    mask[:, 0] = 1
    for c in ordered:
        for k in range(1, len(c)):
            mask[node[tuple(c)], node[tuple(c[:k])]] = 1
    leaves = [c for c in reversed(ordered) if not any(len(o) > len(c) and o[: len(c)] == c for o in ordered)]
    medusa = torch.tensor(
        [[0] + [node[tuple(c[:k])] for k in range(1, len(c) + 1)] + [-1] * (depth - len(c)) for c in leaves]
    )
    eagle = torch.tensor(sorted(medusa.tolist(), key=lambda row: [x if x >= 0 else width + 5 for x in row]))
    positions = torch.tensor([0] + [len(c) for c in ordered])
    return {
        "eagle": eagle,
        "medusa_attn_mask": mask[None, None],
        "medusa_position_ids": positions,
        "retrieve_indices": medusa,
    }


@settings(max_examples=40, deadline=None)
@given(tree_batches(max_cases=3, max_nodes=16))
def test_layouts_round_trip_on_generated_batches(tree) -> None:  # type: ignore[no-untyped-def]
    """Any batch of trees (padded rows included) through each layout and back, outputs translated both ways."""
    path, token = tree_specinfer(tree, torch.Generator().manual_seed(0))
    real = tree.real

    def same(other: trees.TreeBatch) -> None:
        assert torch.equal(other.parents, tree.parents)
        assert torch.equal(torch.where(real, other.tokens, -1)[:, 1:], torch.where(real, tree.tokens, -1)[:, 1:])
        assert torch.equal(other.target_probs[real], tree.target_probs[real])
        assert (
            tree.draft_probs is None
            or other.draft_probs is not None
            and torch.equal(other.draft_probs[real], tree.draft_probs[real])
        )

    eagle = trees.to_eagle(tree)
    back = trees.from_eagle(eagle.retrieve_indices, tree.tokens, tree.target_probs, tree.draft_probs)
    same(back.tree)
    assert torch.equal(back.to_path(*eagle.from_path(path)), path)
    medusa = trees.to_medusa(tree)
    again = trees.from_medusa(medusa.buffers(), medusa.tree_candidates, tree.target_probs, tree.draft_probs)
    same(again.tree)
    assert torch.equal(again.to_path(*medusa.from_path(path)), path)
    for prefix_len in (1, 4):
        sequoia = trees.to_sequoia(tree, prefix_len)
        third = trees.from_sequoia(
            sequoia.successors, sequoia.sequence(), tree.target_probs, tree.draft_probs, prefix_len=prefix_len
        )
        same(third.tree)
        out = third.to_path(*sequoia.from_path(path, token))
        assert torch.equal(out[0], path) and torch.equal(out[1], token)


def test_eagle_buffers_as_eagle_builds_them() -> None:
    buffers = choice_buffers(CHOICES)
    tokens = torch.tensor([[0, 5, 6, 7, 8, 9, 10, 11], [0, 1, 2, 3, 4, 5, 6, 7]])
    target, draft = laws(2, 8), laws(2, 8, seed=1)
    layout = trees.from_eagle(buffers["eagle"], tokens, target, draft)
    assert layout.tree.parents.tolist() == [[-1, 0, 0, 0, 1, 1, 2, 4]] * 2  # EAGLE's numbering is already canonical
    assert torch.equal(layout.retrieve_indices, buffers["eagle"].expand(2, -1, -1))
    assert torch.equal(trees.to_eagle(layout.tree).retrieve_indices, layout.retrieve_indices)
    assert layout.candidates[0].tolist() == [[0, 5, 8, 11], [0, 5, 9, -1], [0, 6, 10, -1], [0, 7, -1, -1]]
    assert torch.equal(layout.target_probs[:, 0, 3], target[:, 7]) and (layout.target_probs[:, 3, 2] == 0).all()
    # per-parent draft rows: nodes 0, 1, 2, 4 have children; node 5 (row 1, depth 2) was drawn from node 1's row
    assert torch.equal(layout.draft_rows, draft[:, [0, 1, 2, 4]])
    assert layout.parent_rows[0].tolist() == [[-1, 0, 1, 3], [-1, 0, 1, -1], [-1, 0, 2, -1], [-1, 0, -1, -1]]
    assert layout.draft_token_probs[0, 1, 2] == draft[0, 1, 9] and layout.draft_token_probs[0, 3, 2] == 1.0


def test_medusa_buffers_as_medusa_builds_them() -> None:
    buffers = choice_buffers(CHOICES)
    medusa = {k: buffers[k] for k in ("medusa_attn_mask", "medusa_position_ids", "retrieve_indices")}
    tokens = torch.tensor([[0, 5, 6, 7, 8, 9, 10, 11]])
    layout = trees.from_medusa(medusa, tokens, laws(1, 8))
    assert layout.tree.parents.tolist() == [[-1, 0, 0, 0, 1, 1, 2, 4]]
    again = trees.to_medusa(layout.tree).buffers()
    assert torch.equal(again["medusa_attn_mask"][0], medusa["medusa_attn_mask"][0, 0])
    assert torch.equal(again["medusa_position_ids"][0], medusa["medusa_position_ids"])
    assert torch.equal(
        again["retrieve_indices"][0], medusa["retrieve_indices"]
    )  # deepest leaf first, as Medusa lists them
    assert layout.candidates[0, -1].tolist() == [0, 7, 0, 0]  # padded with token 0, as Medusa pads
    assert layout.to_path(torch.tensor([1]), torch.tensor([1])).tolist() == [[0, 2, -1, -1]]  # row 1 is leaf (1, 0)


def test_sequoia_successors_as_sequoia_grows_them() -> None:
    successors = [[1, 2, 3], [4, 5], [6], [], [7], [], [], []]  # children after their parents
    prefix = [11, 12, 13]
    tokens = torch.tensor([prefix + [1, 2, 3, 4, 5, 6, 7]])  # node i at position i + 2
    target = laws(1, 8)
    layout = trees.from_sequoia(successors, tokens, target, prefix_len=3)
    assert layout.tree.parents.tolist() == [[-1, 0, 0, 0, 1, 1, 2, 4]]
    assert layout.tree.tokens[0, 1:].tolist() == [1, 2, 3, 4, 5, 6, 7]
    again = trees.to_sequoia(layout.tree, prefix_len=3)
    assert again.successor_lists() == successors
    assert torch.equal(again.sequence(torch.tensor([prefix])), tokens)
    path = torch.tensor([[0, 1, 4, 7]])
    accept_list, _ = again.from_path(path, torch.tensor([3]))
    assert accept_list.tolist() == [[0, 1, 2, 3, 6, 9]]  # the prefix's positions, then node + 2
    assert layout.to_path(accept_list, torch.tensor([3]))[0].tolist() == path.tolist()


def test_sequoia_renumbers_a_tree_grown_out_of_breadth_first_order() -> None:
    successors = [[2, 1], [], [3], []]  # node 2 tried before node 1
    layout = trees.from_sequoia(successors, torch.tensor([[9, 4, 5, 6]]), laws(1, 4))
    assert layout.order.tolist() == [[0, 2, 1, 3]]
    assert layout.tree.parents.tolist() == [[-1, 0, 0, 1]] and layout.tree.tokens[0, 1:].tolist() == [5, 4, 6]
    assert layout.to_path(torch.tensor([[0, 2, 3]]), torch.tensor([1]))[0].tolist() == [[0, 1, 3]]


def test_sequoia_takes_one_successor_list_per_row() -> None:
    per_row = [[[1, 2], [], [], []], [[1], [2], [3], []]]  # a star of two (node 3 unused) and a chain
    layout = trees.from_sequoia(per_row, torch.tensor([[9, 4, 5, 0], [9, 4, 5, 6]]), laws(2, 4))
    assert layout.tree.parents.tolist() == [[-1, 0, 0, -2], [-1, 0, 1, 2]]
    assert layout.successor_lists(0) == [[1, 2], [], [], []] and layout.successor_lists(1) == per_row[1]


def test_outputs_naming_no_node_are_kept_visible() -> None:
    layout = trees.to_eagle(
        trees.from_eagle(choice_buffers(CHOICES)["eagle"], torch.zeros(1, 8, dtype=torch.int64), laws(1, 8)).tree
    )
    assert layout.to_path(torch.tensor([9]), torch.tensor([1]))[0, 0] == 8  # no row 9: node N, the audit reports it
    sequoia = trees.to_sequoia(layout.tree, prefix_len=2)
    assert (
        sequoia.to_path(torch.tensor([[1, 2, -1, -1, -1]]), torch.tensor([0]))[0][0, 0] == 8
    )  # the prefix is not 0, 1


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[1, 2, -1]], "starts at the root"),
        ([[0, -1, 2]], "not a prefix chain"),
        ([[0, 1, 2], [0, 3, 2]], "two different parents"),
        ([[0, 1, 1]], "two different parents"),
        ([[0, 9, -1]], "outside"),
        ([[0, 1, 0]], "root 0 appears below"),
    ],
)
def test_eagle_malformed_rows_are_refused(rows: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trees.from_eagle(torch.tensor(rows), torch.zeros(1, 4, dtype=torch.int64), laws(1, 4))


def test_medusa_malformed_buffers_are_refused() -> None:
    buffers = choice_buffers(CHOICES)
    medusa = {k: buffers[k] for k in ("medusa_attn_mask", "medusa_position_ids", "retrieve_indices")}
    tokens, target = torch.zeros(1, 8, dtype=torch.int64), laws(1, 8)
    wrong_depth = dict(medusa, medusa_position_ids=torch.tensor([0, 1, 1, 1, 2, 2, 2, 2]))  # node 7 is at depth 3
    with pytest.raises(ValueError, match="one per depth"):
        trees.from_medusa(wrong_depth, tokens, target)
    off_tree = dict(medusa, retrieve_indices=torch.tensor([[0, 2, 4, -1]]))  # node 4's parent is node 1
    with pytest.raises(ValueError, match="not a path of medusa_attn_mask"):
        trees.from_medusa(off_tree, tokens, target)
    with pytest.raises(ValueError, match="on no row"):
        trees.from_medusa(
            dict(medusa, retrieve_indices=medusa["retrieve_indices"][:-1]), tokens, target
        )  # leaf (2,) left out
    with pytest.raises(ValueError, match="expected 2 dimensions"):
        trees.from_medusa(dict(medusa, retrieve_indices=torch.zeros(3, 2, 2, 2, dtype=torch.int64)), tokens, target)


@pytest.mark.parametrize(
    ("successors", "message"),
    [
        ([[2], [], [1]], "parent after its child"),
        ([[1, 2], [2], []], "two nodes"),
        ([[1, 5], [], []], "outside"),
        ([[1, 1], [], []], "two nodes"),
    ],
)
def test_sequoia_malformed_successors_are_refused(successors: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trees.from_sequoia(successors, torch.zeros(1, 3, dtype=torch.int64), laws(1, 3))


def test_sequoia_token_buffer_must_hold_prefix_and_tree() -> None:
    with pytest.raises(ValueError, match="prefix_len 2"):
        trees.from_sequoia([[1], []], torch.zeros(1, 2, dtype=torch.int64), laws(1, 2), prefix_len=2)
