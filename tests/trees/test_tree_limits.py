"""A tree sampler's declared limits (most children a node, deepest depth, most nodes, reserved token
ids): validated where declared, recorded in the run, respected by every tree the family poses, and
what they leave out said by the check and by the run."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
import torch

import specverify
from specverify._trees.limits import TreeLimits, shape_counts
from specverify.checks._tree_cases import fixed_tree
from specverify.errors import SamplerSpecError
from specverify.report import write_report
from specverify.samplers import tree_target_only
from specverify.trees import TreeBatch, tree_law

RESERVED = (0, 2)
#: Cheap and decisive: the exact audits on every fixed and generated tree, a skip, one law check.
SELECTION = ["trees.output*", "trees.support*", "trees.conditional[[]wide]", "trees.target-law[[]star]"]


def _strict(tree: TreeBatch, generator: Any = None, *, uniforms: Any = None) -> Any:
    """The target-only reference behind a real buffer's limits: it raises on more than 10 children
    a node, depth past 3, more than 40 nodes, and on a reserved id (0 padding, 2 end) as a candidate."""
    children = (tree.parents[:, 1:, None] == torch.arange(tree.width)).sum(dim=1)
    if int(children.max()) > 10 or tree.depth > 3 or tree.width > 40:
        raise ValueError(f"buffer overflow: {int(children.max())} children, depth {tree.depth}, {tree.width} nodes")
    candidates = tree.tokens[:, 1:][tree.real[:, 1:]]
    if torch.isin(candidates, torch.tensor(RESERVED)).any():
        raise ValueError("a reserved token id as a candidate")
    return tree_target_only(tree, generator, **({} if uniforms is None else {"uniforms": uniforms}))


def _declared(**limits: Any) -> Any:
    def sampler(tree: TreeBatch, generator: Any = None, *, uniforms: Any = None) -> Any:
        return _strict(tree, generator, uniforms=uniforms)

    return specverify.tree_sampler(sampler, algorithm="target-only", name="strict", uniforms=True, **limits)


LIMITS = {"max_children": 10, "max_depth": 3, "max_nodes": 40, "reserved_tokens": RESERVED}


def test_a_verifier_within_its_declared_limits_passes_and_the_run_says_what_it_left_out(tmp_path: Path) -> None:
    result = specverify.check(_declared(**LIMITS), budget="quick", seed=0, select=SELECTION, isolation="in-process")
    statuses = {c.id: c.status for c in result.checks}
    assert not {"fail", "error"} & set(statuses.values()), statuses
    assert (
        statuses["trees.output[shapes]"]
        == statuses["trees.output[generated]"]
        == statuses["trees.target-law[star]"]
        == "pass"
    )
    wide = next(c for c in result.checks if c.id == "trees.conditional[wide]")
    assert (
        wide.status == "skip" and "36 children at one node, more than the declared max_children=10" in wide.message
    )  # skipped, never passed
    shapes = next(c for c in result.checks if c.id == "trees.output[shapes]")
    assert len(shapes.evidence["not_posed"]) == 3 and "not posed" in shapes.message  # wide, 64 siblings, 64 nodes
    not_posed = result.to_json()["run"]["not_posed"]
    assert any(line.startswith("trees.conditional[wide]: the wide tree") for line in not_posed)
    assert any(line.startswith("trees.output[generated]: generated trees cut") for line in not_posed)
    page = tmp_path / "strict.html"
    write_report(result, page)
    assert all(
        html.escape(line, quote=False) in page.read_text(encoding="utf-8") for line in not_posed
    )  # the report's banner lists them
    capabilities = result.to_json()["run"]["sampler"]["capabilities"]  # the declared limits, recorded
    assert (capabilities["max_children"], capabilities["max_depth"], capabilities["max_nodes"]) == (10, 3, 40)
    assert list(capabilities["reserved_tokens"]) == [0, 2]


@pytest.mark.parametrize("undeclared", ["max_children", "reserved_tokens"])
def test_the_same_verifier_fails_where_it_does_not_declare_a_limit(undeclared: str) -> None:
    limits = {k: v for k, v in LIMITS.items() if k != undeclared}
    result = specverify.check(
        _declared(**limits), budget="quick", seed=0, select=["trees.output*"], isolation="in-process"
    )
    assert "fail" in {c.status for c in result.checks}
    raised = [c for c in result.checks if c.status == "fail"]
    assert all(c.evidence["violation"] == "raised" for c in raised)


def test_nonsense_limits_are_refused_where_declared() -> None:
    for bad in (
        {"max_children": 0},
        {"max_depth": -1},
        {"max_nodes": 1},
        {"max_children": True},
        {"max_depth": 2.5},
        {"reserved_tokens": (-1,)},
        {"reserved_tokens": (7,), "max_vocab": 4},
        {"reserved_tokens": "02"},
        {"reserved_tokens": (0.0,)},
    ):
        with pytest.raises(ValueError, match="Capabilities"):
            specverify.Capabilities(**bad)
    assert specverify.Capabilities(reserved_tokens=[2, 0, 2]).reserved_tokens == (0, 2)


def test_a_chain_sampler_declaring_tree_limits_is_refused_at_load() -> None:
    @specverify.sampler(reserved_tokens=(0,))
    def chain(target_probs: Any, draft_probs: Any, draft_tokens: Any, generator: Any) -> Any:
        raise AssertionError("never called")

    with pytest.raises(SamplerSpecError, match="capabilities of a tree sampler"):
        specverify.check(chain, budget="quick", select=["contract.output"], isolation="in-process")


def test_a_renamed_tree_is_the_same_case_and_holds_no_reserved_candidate() -> None:
    limits = TreeLimits(reserved=RESERVED)
    for kind in ("chain", "star", "binary", "duplicates", "zeros", "weighted-residual"):
        tree = fixed_tree(kind, 3, "target-only")
        renamed = limits.relabel(tree)
        assert not torch.isin(renamed.tokens[0, 1:], torch.tensor(RESERVED)).any()
        before, after = tree_law(tree, "target-only")[0], tree_law(renamed, "target-only")[0]
        assert torch.equal(renamed.parents, tree.parents)
        assert torch.allclose(before.sum(-1), after.sum(-1))  # where paths end: the same
        for node in range(tree.width):  # and what follows each end, the same masses under new names
            b, a = before[node][before[node] > 0].sort().values, after[node][after[node] > 0].sort().values
            assert torch.allclose(b, a)
    assert TreeLimits().relabel(tree) is tree  # nothing declared: the very same tree


def test_pruning_and_drafts_respect_the_limits() -> None:
    limits = TreeLimits(max_children=2, max_depth=2, max_nodes=5, reserved=RESERVED)
    tree = fixed_tree("wide", 1, "target-only")
    pruned, kept = limits.prune(tree)
    children, depth, nodes = shape_counts(pruned.parents[0].tolist())
    assert children <= 2 and depth <= 2 and nodes <= 5 and kept[0] == 0
    assert not torch.isin(pruned.tokens[0, 1:], torch.tensor(RESERVED)).any()
    drafts = limits.drafts_without_reserved(torch.full((3, 6), 1 / 6, dtype=torch.float64))
    assert torch.all(drafts[:, list(RESERVED)] == 0) and torch.allclose(
        drafts.sum(-1), torch.ones(3, dtype=torch.float64)
    )
