"""The EAGLE, Medusa and Sequoia tree adapters of examples/: each imports public names only, adapts
its layout in about twenty lines, and follows its declared algorithm's exact law (a G-test at
alpha = 1e-6 on 20,000 runs of each of two trees); the same test rejects the layout's known lossy
variant (EAGLE-1's raw-draft ratio, Medusa's typical acceptance, Sequoia's rule keeping rejected
tokens in the draft law), with power >= 0.99 at the deviation an independent run measures."""

from __future__ import annotations

import ast
import functools
import pathlib

import numpy as np
import pytest
import torch

from specverify._seeds import derive_seed
from specverify._trees.contract import TreeBatch, audit_tree_output
from specverify._trees.exact import tree_law
from specverify.stats import gof_test, power_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALPHA = 1e-6
SAMPLES = 20_000
#: example -> (the verifier function, the keyword that makes it the layout's lossy variant)
EXAMPLES = {
    "eagle": ("evaluate_posterior", {"eagle1_ratio": True}),
    "medusa": ("evaluate_posterior", {"typical": (0.09, 0.3)}),
    "sequoia": ("verify", {"remove_rejected": False}),
}


@pytest.fixture(params=sorted(EXAMPLES))
def example(request, load_by_path):  # type: ignore[no-untyped-def]
    module = load_by_path(f"examples/{request.param}_tree_adapter.py")
    module.layout_name = request.param
    return module


def laws(*weights: list[int]) -> torch.Tensor:
    w = torch.tensor(weights, dtype=torch.float64)
    return (w / w.sum(-1, keepdim=True))[None]


def trees() -> TreeBatch:
    """A fork of depth 2 (one branch shorter) and a star of four, distinct siblings of positive
    draft probability (trees a drafter without replacement can produce); the star's draft row
    leaves mass to its later children, so a wrong ratio or residual after a rejection shows."""
    fork = TreeBatch(
        torch.tensor([[-1, 0, 0, 1, 1, 2]]),
        torch.tensor([[0, 1, 2, 0, 3, 3]]),
        laws([2, 4, 6, 4], [4, 4, 4, 4], [1, 3, 5, 7], [8, 4, 2, 2], [4, 4, 4, 4], [1, 1, 7, 7]),
        laws([1, 5, 6, 4], [5, 1, 2, 8], [2, 2, 2, 10], [4, 4, 4, 4], [4, 4, 4, 4], [4, 4, 4, 4]),
    )
    zero = torch.zeros(1, 1, 4, dtype=torch.float64)
    star = TreeBatch(
        torch.tensor([[-1, 0, 0, 0, 0, -2]]),
        torch.tensor([[0, 3, 2, 0, 1, -1]]),
        torch.cat([laws([4, 4, 4, 4], [4, 4, 4, 4], [8, 8, 0, 0], [1, 1, 1, 13], [2, 6, 2, 6]), zero], dim=1),
        torch.cat([laws([1, 2, 3, 10], [4, 4, 4, 4], [4, 4, 4, 4], [4, 4, 4, 4], [4, 4, 4, 4]), zero], dim=1),
    )
    return TreeBatch.concat([fork, star])


def run(sampler, tree: TreeBatch, seed: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    fields = (tree.parents, tree.tokens, tree.target_probs, tree.draft_probs)
    batch = TreeBatch(*(x.repeat_interleave(SAMPLES, dim=0) for x in fields if x is not None))
    path, token = sampler(batch, torch.Generator().manual_seed(derive_seed("tests.trees.layouts", seed)))
    assert audit_tree_output(batch, (path, token)) == []
    last = path.gather(1, ((path >= 0).sum(1, keepdim=True) - 1)).squeeze(1)
    cell = torch.arange(tree.batch).repeat_interleave(SAMPLES) * tree.width * tree.vocab + last * tree.vocab + token
    return torch.bincount(cell, minlength=tree.batch * tree.width * tree.vocab).reshape(tree.batch, -1).numpy()


def law_of(tree: TreeBatch, algorithm: str) -> np.ndarray:
    return tree_law(tree, algorithm).reshape(tree.batch, -1).numpy()


def test_each_adapter_follows_its_declared_law(example) -> None:  # type: ignore[no-untyped-def]
    assert example.sampler.contract == "tree"
    tree = trees()
    observed = run(example.sampler, tree, example.layout_name)
    assert gof_test(observed, law_of(tree, example.sampler.algorithm), alpha=ALPHA, random_state=0).pvalue > ALPHA


def test_the_same_test_catches_the_layouts_lossy_variant(example, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    name, broken = EXAMPLES[example.layout_name]
    monkeypatch.setattr(example, name, functools.partial(getattr(example, name), **broken))
    tree = trees()
    law = law_of(tree, example.sampler.algorithm)
    estimate = run(
        example.sampler, tree, f"{example.layout_name}-broken-estimate"
    )  # the deviation, on an independent run
    tv = 0.5 * np.abs(estimate / estimate.sum(axis=1, keepdims=True) - law).sum(axis=1).mean()
    assert power_of(SAMPLES * tree.batch, tv / 2, int((law > 0).sum()) - tree.batch, ALPHA) >= 0.99
    observed = run(example.sampler, tree, f"{example.layout_name}-broken")
    assert gof_test(observed, law, alpha=ALPHA, random_state=0).pvalue < ALPHA


def test_each_example_imports_public_names_only_and_adapts_in_about_twenty_lines(example) -> None:  # type: ignore[no-untyped-def]
    source = (ROOT / "examples" / f"{example.layout_name}_tree_adapter.py").read_text()
    imported = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported += [f"{node.module}.{alias.name}" for alias in node.names]
    ours = [name for name in imported if name.split(".")[0] == "specverify"]
    assert ours and not [name for name in ours if any(part.startswith("_") for part in name.split("."))]
    adapter = source.split("# --- the adapter", 1)[1]
    lines = [line for line in adapter.splitlines()[1:] if line.strip() and not line.lstrip().startswith("#")]
    assert 5 <= len(lines) <= 22, len(lines)


def test_docs_quote_each_adapter_as_it_is() -> None:
    """docs/trees.md's "Real layouts" quotes the three adapters line for line, in order."""
    section = (ROOT / "docs" / "trees.md").read_text().split("## Real layouts", 1)[1].split("\n## ", 1)[0]
    snippets = [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]
    assert len(snippets) == 3
    for name, snippet in zip(("eagle", "medusa", "sequoia"), snippets, strict=True):
        source = (ROOT / "examples" / f"{name}_tree_adapter.py").read_text()
        lines = [line.strip() for line in snippet.splitlines() if line.strip()]
        assert len(lines) >= 6
        assert all(line in source for line in lines), name
