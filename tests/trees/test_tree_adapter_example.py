"""The ten-line SGLang tree adapter of docs/trees.md, against a stand-in with sgl-kernel's
signature: its outputs are valid and follow the target-only law; thresholds below 1 and duplicate
siblings are caught (the power of the same test)."""

from __future__ import annotations

import functools
import pathlib

import numpy as np
import pytest
import torch

from specverify._seeds import derive_seed
from specverify._trees.contract import TreeBatch, audit_tree_output
from specverify._trees.exact import tree_law
from specverify.stats import gof_test, power_of

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sglang_tree_adapter.py"
ALPHA = 1e-6
SAMPLES = 20_000


@pytest.fixture(scope="module")
def example(load_by_path):  # type: ignore[no-untyped-def]
    return load_by_path("examples/sglang_tree_adapter.py")


def dyadic(*weights: list[int]) -> torch.Tensor:
    """Rows of weights summing to 16: exact in float32, so the float64 law is the kernel's."""
    w = torch.tensor(weights, dtype=torch.float64)
    assert (w.sum(-1) == 16).all()
    return (w / 16)[None]


def trees(duplicate: bool = False) -> TreeBatch:
    """A fork of depth 2 (one branch shorter) and a star of four; siblings distinct unless ``duplicate``."""
    fork = TreeBatch(
        torch.tensor([[-1, 0, 0, 1, 1, 2]]),
        torch.tensor([[0, 1, 2, 0, 3, 3]]),
        dyadic([2, 4, 6, 4], [4, 4, 4, 4], [1, 3, 5, 7], [8, 4, 2, 2], [4, 4, 4, 4], [1, 1, 7, 7]),
    )
    star_tokens = [0, 3, 2, 3, 1] if duplicate else [0, 3, 2, 0, 1]
    star = TreeBatch(
        torch.tensor([[-1, 0, 0, 0, 0, -2]]),
        torch.tensor([star_tokens + [-1]]),
        torch.cat(
            [
                dyadic([2, 2, 4, 8], [4, 4, 4, 4], [8, 8, 0, 0], [1, 1, 1, 13], [2, 6, 2, 6]),
                torch.zeros(1, 1, 4, dtype=torch.float64),
            ],
            dim=1,
        ),
    )
    return TreeBatch.concat([fork, star])


def run(sampler, tree: TreeBatch, seed: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    batch = TreeBatch(*(x.repeat_interleave(SAMPLES, dim=0) for x in (tree.parents, tree.tokens, tree.target_probs)))
    path, token = sampler(batch, torch.Generator().manual_seed(derive_seed("tests.trees.sglang", seed)))
    assert audit_tree_output(batch, (path, token)) == []
    last = path.gather(1, ((path >= 0).sum(1, keepdim=True) - 1)).squeeze(1)
    cell = torch.arange(tree.batch).repeat_interleave(SAMPLES) * tree.width * tree.vocab + last * tree.vocab + token
    return torch.bincount(cell, minlength=tree.batch * tree.width * tree.vocab).reshape(tree.batch, -1).numpy()


def law_of(tree: TreeBatch) -> np.ndarray:
    return tree_law(tree, "target-only").reshape(tree.batch, -1).numpy()


def test_the_adapter_follows_the_target_only_law(example) -> None:  # type: ignore[no-untyped-def]
    assert example.sampler.algorithm == "target-only"
    tree = trees()
    observed = run(example.sampler, tree, "exact")
    assert gof_test(observed, law_of(tree), alpha=ALPHA, random_state=0).pvalue > ALPHA


def test_the_same_test_catches_thresholds_below_one(example, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    relaxed = functools.partial(example.tree_speculative_sampling_target_only, threshold_single=0.5, threshold_acc=0.5)
    monkeypatch.setattr(example, "tree_speculative_sampling_target_only", relaxed)
    tree = trees()
    observed = run(example.sampler, tree, "relaxed")
    law = law_of(tree)
    estimate = run(example.sampler, tree, "relaxed-estimate")  # the deviation, measured on an independent run
    empirical = estimate / estimate.sum(axis=1, keepdims=True)
    tv = 0.5 * np.abs(empirical - law).sum(axis=1).mean()
    assert power_of(SAMPLES * tree.batch, tv / 2, int((law > 0).sum()) - tree.batch, ALPHA) >= 0.99
    assert gof_test(observed, law, alpha=ALPHA, random_state=0).pvalue < ALPHA


def test_the_same_test_catches_duplicate_siblings_counted_twice(example) -> None:  # type: ignore[no-untyped-def]
    tree = trees(duplicate=True)  # the star's node 3 repeats node 1's token: SGLang adds its mass again
    observed = run(example.sampler, tree, "duplicate")
    assert gof_test(observed, law_of(tree), alpha=ALPHA, random_state=0).pvalue < ALPHA


def test_docs_quote_the_adapter_as_it_is() -> None:
    """docs/trees.md's ten-line adapter is the example's code, line for line."""
    docs = (EXAMPLE.parents[1] / "docs" / "trees.md").read_text()
    section = docs.split("## A ten-line adapter from the SGLang layout", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    source = EXAMPLE.read_text()
    lines = [line for line in snippet.splitlines() if line.strip()]
    assert len(lines) >= 10
    for line in lines:
        assert line in source, line
