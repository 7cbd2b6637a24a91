"""The tree step contract: validation, structure, the chain as a path tree, the exact output audit."""

from __future__ import annotations

import pytest
import torch

from specverify._trees.contract import TreeBatch, as_chain_sampler, audit_tree_output, chain_output
from specverify.samplers import reference

V = 4


def star_and_chain() -> TreeBatch:
    """Row 0: root with children 1, 2 and node 3 under node 1.  Row 1: a chain 0-1-2, one padding node."""
    parents = torch.tensor([[-1, 0, 0, 1], [-1, 0, 1, -2]])
    tokens = torch.tensor([[9, 1, 2, 0], [9, 0, 3, -1]])
    target = torch.full((2, 4, V), 0.25, dtype=torch.float64)
    target[0, 1] = torch.tensor([0.5, 0.0, 0.0, 0.5], dtype=torch.float64)  # after node 1, tokens 1 and 2 impossible
    return TreeBatch(parents, tokens, target)


def test_structure() -> None:
    tree = star_and_chain()
    assert tree.num_nodes.tolist() == [4, 3]
    assert tree.node_depth.tolist() == [[0, 1, 1, 2], [0, 1, 2, -1]]
    assert tree.depth == 2
    assert tree.sibling_rank[0].tolist() == [0, 0, 1, 0]
    assert tree.children[0].tolist() == [[1, 2], [3, -1], [-1, -1], [-1, -1]]
    assert tree.children[1].tolist() == [[1, -1], [2, -1], [-1, -1], [-1, -1]]
    assert not tree.is_chain


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p, t: p.__setitem__((0, 0), 0), "root's parent is 0"),
        (lambda p, t: p.__setitem__((0, 2), 2), "parent 2 is not an earlier node"),
        (lambda p, t: p.__setitem__((0, 1), -2), "real node after a padding node"),
        (lambda p, t: t.__setitem__((1, 2), V), f"token {V} is outside"),
        (lambda p, t: t.__setitem__((0, 3), -1), "token -1 is outside"),
    ],
)
def test_invalid_trees_are_refused_in_one_line(change, message) -> None:  # type: ignore[no-untyped-def]
    tree = star_and_chain()
    parents, tokens = tree.parents.clone(), tree.tokens.clone()
    change(parents, tokens)
    with pytest.raises(ValueError, match=message) as info:
        TreeBatch(parents, tokens, tree.target_probs)
    assert "\n" not in str(info.value)


def test_invalid_laws_are_refused() -> None:
    tree = star_and_chain()
    target = tree.target_probs.clone()
    target[1, 1] = 0
    with pytest.raises(ValueError, match="row 1, node 1: target_probs sums to 0"):
        TreeBatch(tree.parents, tree.tokens, target)
    target = tree.target_probs.clone()
    target[1, 3] = float("nan")  # a padding node's law is never read
    TreeBatch(tree.parents, tree.tokens, target)
    draft = torch.zeros_like(tree.target_probs)
    draft[:, 0] = 1.0
    draft[0, 1] = 1.0
    with pytest.raises(ValueError, match="row 1, node 1: draft_probs sums to 0"):  # node 1 of row 1 has a child
        TreeBatch(tree.parents, tree.tokens, tree.target_probs, draft)
    draft[1, 1] = 1.0
    TreeBatch(tree.parents, tree.tokens, tree.target_probs, draft)  # leaves may have zero draft rows
    with pytest.raises(ValueError, match="int64"):
        TreeBatch(tree.parents.int(), tree.tokens, tree.target_probs)


def audit_rules(tree: TreeBatch, path: list[list[int]], token: list[int]) -> list[str]:
    return [v.rule for v in audit_tree_output(tree, (torch.tensor(path), torch.tensor(token)))]


def test_audit_accepts_valid_outputs() -> None:
    tree = star_and_chain()
    assert audit_rules(tree, [[0, 1, 3], [0, 1, 2]], [0, 3]) == []
    assert audit_rules(tree, [[0, 2, -1], [0, -1, -1]], [0, 3]) == []


@pytest.mark.parametrize(
    ("path", "token", "rule"),
    [
        ([[1, -1, -1], [0, -1, -1]], [0, 0], "path-root"),
        ([[0, -1, 3], [0, -1, -1]], [0, 0], "path-padding"),
        ([[0, -1, -1], [0, 1, 3]], [0, 0], "path-range"),  # node 3 of row 1 is padding
        ([[0, 2, 3], [0, -1, -1]], [0, 0], "path-edge"),  # 3 is a child of 1, not of 2
        ([[0, 3, -1], [0, -1, -1]], [0, 0], "path-edge"),
        ([[0, -1, -1], [0, -1, -1]], [0, V], "token-range"),
        ([[0, -1, -1], [0, 1, -1]], [0, -1], "no-token"),
        ([[0, 1, -1], [0, -1, -1]], [2, 0], "zero-target"),  # after node 1, token 2 has probability 0
    ],
)
def test_audit_names_each_broken_rule(path, token, rule) -> None:  # type: ignore[no-untyped-def]
    assert rule in audit_rules(star_and_chain(), path, token)


def test_no_token_is_its_own_violation_not_a_token_out_of_range() -> None:
    """A verifier that returns ``-1`` (no bonus drawn after a leaf) breaks ``no-token``, said in words."""
    violations = audit_tree_output(star_and_chain(), (torch.tensor([[0, -1, -1], [0, 1, -1]]), torch.tensor([0, -1])))
    assert [v.rule for v in violations] == ["no-token"]
    assert "emitted no token" in violations[0].message and "outside" not in violations[0].message
    assert violations[0].row == 1


def test_audit_an_accepted_node_of_zero_target_mass() -> None:
    """The coin-0 bug (SGLang #35771): a node whose token the target cannot emit was accepted."""
    tree = star_and_chain()
    tokens = tree.tokens.clone()
    tokens[0, 3] = 1  # probability 0 after node 1
    tree = TreeBatch(tree.parents, tokens, tree.target_probs)
    violations = audit_tree_output(tree, (torch.tensor([[0, 1, 3], [0, -1, -1]]), torch.tensor([0, 0])))
    assert [(v.rule, v.finding, v.row) for v in violations] == [("zero-target", "support", 0)]
    assert "accepted node 3 holds token 1" in violations[0].message


def test_audit_shape_and_dtype() -> None:
    tree = star_and_chain()
    assert audit_rules(tree, [[0, -1], [0, -1]], [0, 0]) == ["shape-dtype"]
    out = audit_tree_output(tree, (torch.zeros(2, 3, dtype=torch.int32), torch.zeros(2, dtype=torch.int64)))
    assert [v.rule for v in out] == ["shape-dtype"] and "int32" in out[0].message
    assert audit_tree_output(tree, None)[0].rule == "shape-dtype"


def random_chain(batch: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    target = torch.rand(batch, k + 1, V, generator=g, dtype=torch.float64)
    draft = torch.rand(batch, k, V, generator=g, dtype=torch.float64)
    drafts = torch.randint(V, (batch, k), generator=g)
    return target, draft, drafts


def test_chain_is_a_path_tree() -> None:
    target, draft, drafts = random_chain(3, 2, seed=1)
    tree = TreeBatch.from_chain(target, draft, drafts)
    assert tree.is_chain and tree.width == 3 and tree.depth == 2
    assert tree.parents.tolist() == [[-1, 0, 1]] * 3
    assert torch.equal(tree.tokens[:, 1:], drafts)
    assert torch.equal(tree.draft_probs[:, :2], draft) and not tree.draft_probs[:, 2].any()
    path = torch.tensor([[0, 1, 2], [0, -1, -1], [0, 1, -1]])
    token = torch.tensor([3, 0, 1])
    tokens, num_accepted = chain_output(tree, path, token)
    assert num_accepted.tolist() == [2, 0, 1]
    assert tokens.tolist() == [[*drafts[0].tolist(), 3], [0, -1, -1], [drafts[2, 0].item(), 1, -1]]
    with pytest.raises(ValueError, match="path tree"):
        chain_output(star_and_chain(), path, token)


def test_as_chain_sampler_keeps_the_chain_uniforms_convention() -> None:
    """A tree sampler that replays the chain reference through the tree contract: same outputs."""

    def replay(tree, generator=None, *, uniforms=None):  # type: ignore[no-untyped-def]
        k = tree.width - 1
        chain_u = torch.cat([uniforms[:, 1:], uniforms[:, :1]], dim=1)
        tokens, accepted = reference(tree.target_probs, tree.draft_probs[:, :k], tree.tokens[:, 1:], uniforms=chain_u)
        path = torch.where(torch.arange(k + 1) <= accepted[:, None], torch.arange(k + 1), -1)
        return path, tokens[torch.arange(tree.batch), accepted]

    replay.capabilities = reference.capabilities
    chain = as_chain_sampler(replay, canonical=True)
    assert chain.capabilities.uniforms and chain.capabilities.canonical
    target, draft, drafts = random_chain(64, 3, seed=2)
    u = torch.rand(64, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for got, want in zip(chain(target, draft, drafts, uniforms=u), reference(target, draft, drafts, uniforms=u)):
        assert torch.equal(got, want)
