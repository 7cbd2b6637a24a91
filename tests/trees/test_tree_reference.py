"""The reference tree samplers against their algorithms' exact laws (G-tests at alpha 1e-6 with a
stated power), exact checks over injected uniforms, and block verification through the chain battery."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import specverify
from specverify._seeds import derive_seed
from specverify._trees.contract import TreeBatch, as_chain_sampler, audit_tree_output
from specverify._trees.exact import accepted_law, expected_accepted, tree_law
from specverify.samplers import TREE_REFERENCES, block_verification, reference, tree_target_only
from specverify.stats import gof_test, mean_test, power_of

ALPHA = 1e-6
SAMPLES = 20_000  # per tree
V = 4


def laws(seed: int, nodes: int, zeros: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(derive_seed("tests.trees.reference", seed))
    w = torch.randint(0 if zeros else 1, 5, (nodes, V), generator=g).to(torch.float64)
    w[w.sum(-1) == 0, 0] = 1.0
    return w / w.sum(-1, keepdim=True)


def rows(*weights: list[float]) -> torch.Tensor:
    w = torch.tensor(weights, dtype=torch.float64)
    return (w / w.sum(-1, keepdim=True))[None]


def small_trees() -> TreeBatch:
    """A fork with a duplicate sibling and zero-mass children, a star of five, a chain of three;
    the target prefers the later siblings, so children are rejected often and the residuals matter."""
    fork = TreeBatch(
        torch.tensor([[-1, 0, 0, 0, 1, 1]]),
        torch.tensor([[0, 0, 1, 3, 2, 2]]),  # at the root token 1 has q = 0, token 3 p = 0; node 5 repeats node 4
        rows([4, 1, 5, 0], [1, 1, 3, 3], [1, 2, 3, 4], [2, 2, 1, 1], [1, 1, 1, 1], [3, 1, 1, 1]),
        rows([6, 0, 1, 1], [1, 1, 4, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]),
    )
    star = TreeBatch(
        torch.tensor([[-1, 0, 0, 0, 0, 0]]),
        torch.tensor([[0, 0, 1, 2, 3, 0]]),
        rows([1, 2, 3, 4], [1, 1, 1, 1], [4, 3, 2, 1], [1, 0, 0, 1], [2, 1, 1, 2], [1, 1, 1, 1]),
        rows([4, 3, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]),
    )
    chain = TreeBatch(
        torch.tensor([[-1, 0, 1, 2]]),
        torch.tensor([[0, 2, 1, 1]]),
        rows([3, 1, 2, 2], [1, 3, 1, 1], [2, 1, 2, 1], [1, 1, 1, 5]),
        rows([1, 1, 4, 2], [1, 2, 1, 2], [1, 3, 1, 1], [1, 1, 1, 1]),
    )
    return TreeBatch.concat([fork, star, chain])


def repeated(tree: TreeBatch, times: int) -> TreeBatch:
    rep = lambda x: None if x is None else x.repeat_interleave(times, dim=0)  # noqa: E731
    return TreeBatch(rep(tree.parents), rep(tree.tokens), rep(tree.target_probs), rep(tree.draft_probs))


def counts(tree: TreeBatch, sampler, seed: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    """``[G, N * V]`` outcome counts ``(last node, token)`` of ``SAMPLES`` runs of each tree."""
    batch = repeated(tree, SAMPLES)
    generator = torch.Generator().manual_seed(derive_seed("tests.trees.reference", seed))
    path, token = sampler(batch, generator)
    assert audit_tree_output(batch, (path, token)) == []
    last = path.gather(1, ((path >= 0).sum(1, keepdim=True) - 1)).squeeze(1)
    cell = torch.arange(tree.batch).repeat_interleave(SAMPLES) * tree.width * V + last * V + token
    return torch.bincount(cell, minlength=tree.batch * tree.width * V).reshape(tree.batch, -1).numpy()


#: A wrong law for each algorithm: another algorithm's law on the same candidates.
WRONG = {"specinfer": "without-replacement", "without-replacement": "specinfer", "target-only": "specinfer"}


@pytest.mark.parametrize("algorithm", ["specinfer", "without-replacement", "target-only"])
def test_tree_reference_follows_its_exact_law(algorithm: str) -> None:
    tree = small_trees()
    sampler = TREE_REFERENCES[algorithm]
    assert sampler.algorithm == algorithm
    observed = counts(tree, sampler, algorithm)
    law = tree_law(tree, algorithm).reshape(tree.batch, -1).numpy()
    result = gof_test(observed, law, alpha=ALPHA, random_state=derive_seed("tests.trees.gof", algorithm))
    assert result.pvalue > ALPHA, result
    # power: the same counts reject a wrong law, and the test had power >= 0.99 against it
    wrong = tree_law(tree, WRONG[algorithm]).reshape(tree.batch, -1).numpy()
    tv = 0.5 * np.abs(wrong - law).sum(axis=1).mean()
    df = int((law > 0).sum()) - tree.batch
    assert power_of(SAMPLES * tree.batch, tv, df, ALPHA) >= 0.99, tv
    assert gof_test(observed, wrong, alpha=ALPHA, random_state=1).pvalue < ALPHA


def chains(seed: int, batch: int, k: int) -> TreeBatch:
    g = torch.Generator().manual_seed(derive_seed("tests.trees.chains", seed))
    target = torch.randint(0, 4, (batch, k + 1, V), generator=g).to(torch.float64)
    target[..., 0] += 1.0
    draft = torch.randint(1, 4, (batch, k, V), generator=g).to(torch.float64)
    drafts = torch.randint(V, (batch, k), generator=g)
    return TreeBatch.from_chain(target, draft, drafts)


def test_block_verification_follows_its_exact_law() -> None:
    tree = chains(0, 3, 3)
    observed = counts(tree, block_verification, "block")
    law = tree_law(tree, "block-verification").reshape(tree.batch, -1).numpy()
    assert gof_test(observed, law, alpha=ALPHA, random_state=2).pvalue > ALPHA
    token_wise = tree_law(tree, "specinfer").reshape(tree.batch, -1).numpy()  # the canonical chain law
    tv = 0.5 * np.abs(token_wise - law).sum(axis=1).mean()
    assert power_of(SAMPLES * tree.batch, tv, int((law > 0).sum()) - tree.batch, ALPHA) >= 0.99, tv
    assert gof_test(observed, token_wise, alpha=ALPHA, random_state=3).pvalue < ALPHA


def test_injected_uniforms_decide_everything() -> None:
    """Hand-computed: p = (.5, .3, .2, 0) at the root, children tokens 3, 0, 1 tried in order."""
    p = torch.tensor(
        [[0.5, 0.3, 0.2, 0.0], [0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 0.0, 1.0], [0.25] * 4], dtype=torch.float64
    )
    tree = TreeBatch(torch.tensor([[-1, 0, 0, 0]]), torch.tensor([[0, 3, 0, 1]]), p[None])
    # coin 0 on token 3 (p = 0): rejected; 0.6 >= g(0) = .5: rejected, g = (0, .6, .4, 0); 0.55 < .6: accepted
    u = torch.tensor([[0.3, 0.0, 0.6, 0.55]], dtype=torch.float64)
    path, token = tree_target_only(tree, uniforms=u)
    assert path.tolist() == [[0, 3]] and token.tolist() == [1]  # node 3's law: cumulative .25, .5 > .3 * 1
    u = torch.tensor([[0.95, 0.0, 0.6, 0.7]], dtype=torch.float64)  # all rejected: g = (0, 0, 1, 0)
    path, token = tree_target_only(tree, uniforms=u)
    assert path.tolist() == [[0, -1]] and token.tolist() == [2]
    again = tree_target_only(tree, torch.Generator().manual_seed(5), uniforms=u)
    assert again[0].tolist() == [[0, -1]] and again[1].tolist() == [2]


def test_coin_zero_never_accepts_a_zero_mass_child() -> None:
    """SGLang #35771: with every coin 0, no algorithm accepts a token of target probability 0."""
    p = rows([0, 1, 1, 2], [1, 1, 1, 1], [1, 1, 1, 1])
    tree = TreeBatch(
        torch.tensor([[-1, 0, 0]]), torch.tensor([[0, 0, 3]]), p, rows([1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1])
    )
    u = torch.zeros(1, 3, dtype=torch.float64)
    for algorithm in ("specinfer", "without-replacement", "target-only"):
        path, token = TREE_REFERENCES[algorithm](tree, uniforms=u)
        assert path.tolist() == [[0, 2]], algorithm  # token 0 (p = 0) refused, its sibling accepted
        assert audit_tree_output(tree, (path, token)) == []


def test_chain_wrapper_of_specinfer_is_the_chain_reference() -> None:
    """On chains SpecInfer is the canonical algorithm: with the same uniforms, the same outputs."""
    tree = chains(1, 256, 3)
    k = tree.width - 1
    wrapped = as_chain_sampler(TREE_REFERENCES["specinfer"])
    assert wrapped.capabilities.canonical and wrapped.capabilities.uniforms
    u = torch.rand(256, k + 1, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    args = (tree.target_probs, tree.draft_probs[:, :k], tree.tokens[:, 1:])
    for got, want in zip(wrapped(*args, uniforms=u), reference(*args, uniforms=u)):
        assert torch.equal(got, want)


def test_block_verification_through_the_chain_battery_is_not_lossy() -> None:
    chain = as_chain_sampler(block_verification)
    assert not chain.capabilities.canonical
    run = specverify.check(chain, budget="quick", select=["fit.first-token*", "fit.step*", "fit.position*"])
    assert all(c.status in ("pass", "skip") for c in run.checks), [(c.id, c.status, c.message) for c in run.checks]
    assert any(c.status == "pass" for c in run.checks)
    assert run.verdict == "inconclusive" and "subset" in run.verdict_reason  # a subset never passes


def accepted_tests(tree: TreeBatch, sampler, law: torch.Tensor, seed: str):  # type: ignore[no-untyped-def]
    """One mean test per tree (its runs share one law of the accepted count; Bonferroni over trees)."""
    batch = repeated(tree, SAMPLES)
    path, _ = sampler(batch, torch.Generator().manual_seed(derive_seed("tests.trees.accepted", seed)))
    accepted = ((path >= 0).sum(dim=1) - 1).reshape(tree.batch, SAMPLES).numpy()
    laws = accepted_law(tree, law).numpy()
    return [mean_test(accepted[g], laws[g], alpha=ALPHA / tree.batch) for g in range(tree.batch)]


@pytest.mark.parametrize("algorithm", ["specinfer", "without-replacement", "target-only"])
def test_accepted_nodes_match_the_exact_expectation(algorithm: str) -> None:
    """Accepted nodes per call against the algorithm's exact law of that count (Chernoff, alpha 1e-6)."""
    tree = small_trees()
    for result in accepted_tests(tree, TREE_REFERENCES[algorithm], tree_law(tree, algorithm), algorithm):
        assert result.pvalue_low > ALPHA / tree.batch and result.pvalue_high > ALPHA / tree.batch, result
        assert result.min_detectable_drop < 0.08  # power 0.99 against a drop of 0.08 accepted nodes per call


def test_block_verification_accepts_more_than_token_wise_measured() -> None:
    """The efficiency judgement against a listed algorithm: block verification's counts sit above the
    token-wise law's expectation (one-sided, alpha 1e-6) on the chains where its exact gain is large
    enough to detect, and match their own expectation on every chain."""
    tree = chains(2, 4, 4)
    own = accepted_tests(tree, block_verification, tree_law(tree, "block-verification"), "block-gain")
    token_wise = accepted_tests(tree, block_verification, tree_law(tree, "specinfer"), "block-gain")
    gain = (
        expected_accepted(tree, tree_law(tree, "block-verification"))
        - expected_accepted(tree, tree_law(tree, "specinfer"))
    ).tolist()
    # (given one fixed draft chain block verification can accept fewer: its advantage holds on
    # average over drafts drawn from the draft, which tests/trees/test_tree_exact.py proves)
    for g, (mine, other) in enumerate(zip(own, token_wise)):
        assert mine.pvalue_low > ALPHA / tree.batch and mine.pvalue_high > ALPHA / tree.batch
        if gain[g] > 2 * other.min_detectable_rise:
            assert other.pvalue_high < ALPHA / tree.batch
    assert any(gain[g] > 2 * token_wise[g].min_detectable_rise for g in range(tree.batch))
