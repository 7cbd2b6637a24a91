"""The target's own law of what the tree references emit, candidates drawn from a model as each
algorithm assumes (G-tests at alpha 1e-6 on completed sequences); a rule on the wrong draw is caught."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specverify._laws.exact import target_law
from specverify._laws.models import ChainModel
from specverify._seeds import derive_seed
from specverify._trees.contract import audit_tree_output
from specverify._trees.draw import completed_sequences, draw_tree, emitted_sequences
from specverify.samplers import TREE_REFERENCES
from specverify.stats import gof_test, min_detectable_tv, power_of

ALPHA = 1e-6
BATCH = 30_000
V = 4
FORK = [-1, 0, 0, 0, 1, 1, 2]  # depth 2, three children at the root


def model() -> ChainModel:
    target = torch.tensor([[4, 1, 2, 1], [1, 3, 0, 4], [2, 2, 2, 2], [0, 1, 5, 2]], dtype=torch.float64)
    draft = torch.tensor([[1, 4, 2, 1], [2, 2, 2, 2], [1, 0, 4, 3], [3, 1, 1, 3]], dtype=torch.float64)
    return ChainModel(target / target.sum(-1, keepdim=True), draft / draft.sum(-1, keepdim=True), (0,))


def completed_counts(algorithm: str, parents: list[int], replacement: bool, seed: str) -> tuple[np.ndarray, np.ndarray]:
    m = model()
    generator = torch.Generator().manual_seed(derive_seed("tests.trees.draw", algorithm, seed))
    tree = draw_tree(m, parents, BATCH, generator, replacement=replacement)
    path, token = TREE_REFERENCES[algorithm](tree, generator)
    assert audit_tree_output(tree, (path, token)) == []
    full = completed_sequences(m, emitted_sequences(tree, path, token), generator)
    index = torch.zeros(BATCH, dtype=torch.int64)
    for column in range(full.shape[1]):
        index = index * V + full[:, column]
    observed = torch.bincount(index, minlength=V ** full.shape[1]).numpy()
    return observed, target_law(m, full.shape[1]).numpy()


@pytest.mark.parametrize(
    ("algorithm", "replacement"),
    [("specinfer", True), ("without-replacement", False), ("target-only", True), ("target-only", False)],
)
def test_drawn_candidates_keep_the_target_law(algorithm: str, replacement: bool) -> None:
    observed, law = completed_counts(algorithm, FORK, replacement, "lossless")
    assert min_detectable_tv(BATCH, int((law > 0).sum()) - 1, ALPHA) < 0.035  # power 0.99 against TV 0.035
    assert gof_test(observed, law, alpha=ALPHA, random_state=0).pvalue > ALPHA


def test_block_verification_keeps_the_target_law() -> None:
    observed, law = completed_counts("block-verification", [-1, 0, 1, 2], True, "block")
    assert gof_test(observed, law, alpha=ALPHA, random_state=0).pvalue > ALPHA


def contrasted() -> ChainModel:
    """A draft that puts most mass where the target puts least (and none on token 3 at the root)."""
    target = torch.tensor([[1, 2, 2, 3], [1, 3, 0, 4], [2, 2, 2, 2], [0, 1, 5, 2]], dtype=torch.float64)
    draft = torch.tensor([[6, 1, 1, 0], [2, 2, 2, 2], [1, 0, 4, 3], [3, 1, 1, 3]], dtype=torch.float64)
    return ChainModel(target / target.sum(-1, keepdim=True), draft / draft.sum(-1, keepdim=True), (0,))


def exact_tv(m: ChainModel, parents: list[int], draw: str, rule: str) -> float:
    """TV between the target's law and the completed law of ``rule`` on children drawn by ``draw`` (Fraction)."""
    from specverify._laws.exact import chain_law_fns, target_law_scalar
    from specverify._trees.exact import _drawn_trees, completed_law_scalar, fixed_emitted_law_scalar

    target, draft = chain_law_fns(m)
    emitted: dict = {}
    for weight, tokens in _drawn_trees(draft, parents, V, draw):
        for key, mass in fixed_emitted_law_scalar(target, parents, tokens, V, rule, draft).items():
            emitted[key] = emitted.get(key, 0) + weight * mass
    completed = completed_law_scalar(emitted, target, V, 2)
    return float(sum(abs(completed.get(s, 0) - mass) for s, mass in target_law_scalar(target, V, 2).items()) / 2)


@pytest.mark.parametrize(("draw", "rule"), [("specinfer", "without-replacement"), ("without-replacement", "specinfer")])
def test_a_rule_on_the_wrong_draw_is_caught(draw: str, rule: str) -> None:
    """Each rule on the other's draw of a star of three: an exact TV (0.19, 0.38) the test detects
    with power >= 0.99, and it does."""
    m, star = contrasted(), [-1, 0, 0, 0]
    tv = exact_tv(m, star, draw, rule)
    generator = torch.Generator().manual_seed(derive_seed("tests.trees.draw.wrong", draw))
    tree = draw_tree(m, star, BATCH, generator, replacement=draw == "specinfer")
    path, token = TREE_REFERENCES[rule](tree, generator)
    full = completed_sequences(m, emitted_sequences(tree, path, token), generator)
    observed = torch.bincount(full[:, 0] * V + full[:, 1], minlength=V * V).numpy()
    law = target_law(m, 2).numpy()
    assert power_of(BATCH, tv, int((law > 0).sum()) - 1, ALPHA) >= 0.99, tv
    assert gof_test(observed, law, alpha=ALPHA, random_state=0).pvalue < ALPHA


def test_draw_tree_without_replacement_needs_enough_tokens() -> None:
    one_hot = ChainModel(torch.eye(2, dtype=torch.float64), torch.eye(2, dtype=torch.float64), (0,))
    with pytest.raises(ValueError, match="more children"):
        draw_tree(one_hot, [-1, 0, 0], 4, torch.Generator().manual_seed(0), replacement=False)
    tree = draw_tree(model(), FORK, 64, torch.Generator().manual_seed(1), replacement=False)
    siblings = tree.tokens[:, 1:4]
    assert (
        (siblings[:, 0] != siblings[:, 1]).all()
        and (siblings[:, 1] != siblings[:, 2]).all()
        and (siblings[:, 0] != siblings[:, 2]).all()
    )
