"""The ``trees`` family in the battery: every tree reference conformant at quick, every tree zoo
member at its declared verdict through the check that catches it."""

from __future__ import annotations

import pytest

import specverify
from specverify.samplers import TREE_REFERENCES
from specverify.zoo import TREE_MEMBERS

#: The cheapest check that reaches each member's declared verdict (a subset can fail a sampler).
CATCHES = {
    "tree-coin-zero-accepts-zero-mass": "trees.support[zero-coins]",
    "tree-residual-from-parent-node": "trees.output[shapes]",
    "tree-siblings-past-32-wrap": "trees.conditional[wide]",
    "tree-duplicate-siblings-counted-twice": "trees.conditional[duplicates]",
    "tree-threshold-below-one": "trees.conditional[star]",
    "tree-block-verification-token-wise-residual": "trees.conditional[weighted-residual]",
    "tree-no-token-after-a-leaf": "trees.output[shapes]",
}


@pytest.mark.parametrize("algorithm", list(TREE_REFERENCES))
def test_tree_reference_conformant_at_quick(algorithm: str) -> None:
    sampler = TREE_REFERENCES[algorithm]
    result = specverify.check(sampler, budget="quick", seed=0)
    assert result.verdict == "conformant", [
        (c.id, c.status, c.message) for c in result.checks if c.status not in ("pass", "skip")
    ]
    assert {c.family for c in result.checks} == {"trees"}
    passed = [c for c in result.checks if c.status == "pass"]
    assert any(c.proves == "loss" for c in passed)  # the target's own law was tested
    for c in passed:
        if c.p_value is not None:  # every statistical result states its level, power and reach
            assert c.alpha is not None and c.alpha > 0 and c.samples and c.reach is not None
    assert result.run["isolation"] == {**result.run["isolation"], "mode": "process", "reason": None, "worker_starts": 1}
    assert result.run["contract"] == "tree" and result.run["sampler"]["algorithm"] == algorithm


def test_a_tree_spec_runs_in_the_worker() -> None:
    result = specverify.check("specverify.samplers:tree_reference", budget="quick", seed=0, select=["trees.support*"])
    assert [c.id for c in result.checks] == ["trees.support[zero-coins]"]
    assert result.checks[0].status == "pass"
    assert result.verdict == "inconclusive"  # a subset never passes
    assert result.run["isolation"]["mode"] == "process" and "trees.output[shapes]" in result.run["left_out"]


#: Lossless members: the whole quick battery must reach their declared verdict.
LOSSLESS = {"tree-prefix-matching-accepts-more", "tree-without-replacement-breaks-on-duplicates"}


def test_every_tree_member_has_its_catching_check() -> None:
    assert set(CATCHES) | LOSSLESS == set(TREE_MEMBERS) and not set(CATCHES) & LOSSLESS
    assert all(m.caught_by == ("trees",) and m.budget == "quick" for name, m in TREE_MEMBERS.items() if name in CATCHES)
    assert all(m.caught_by == () and m.verdict.lossless for name, m in TREE_MEMBERS.items() if name in LOSSLESS)


@pytest.mark.parametrize("name", list(CATCHES))
def test_tree_member_reaches_its_declared_verdict(name: str) -> None:
    member = TREE_MEMBERS[name]
    result = specverify.check(member, budget=member.budget, seed=0, select=[CATCHES[name]])
    failing = [c for c in result.checks if c.status == "fail"]
    assert result.verdict == member.verdict, [(c.id, c.status, c.message) for c in result.checks]
    assert [c.id for c in failing] == [CATCHES[name]]


def test_a_verifier_declaring_no_algorithm_is_held_to_the_best_listed_one() -> None:
    from specverify._calling.tree import tree_sampler
    from specverify.samplers import tree_target_only

    @tree_sampler(uniforms=True)
    def unlabelled(tree, generator=None, *, uniforms=None):  # type: ignore[no-untyped-def]
        return tree_target_only(tree, generator, uniforms=uniforms)

    assert unlabelled.contract == "tree" and unlabelled.algorithm is None  # type: ignore[attr-defined]
    result = specverify.check(
        unlabelled, budget="quick", seed=0, select=["trees.conditional[[]star]", "trees.acceptance[[]star]"]
    )
    by_id = {c.id: c for c in result.checks}  # the acceptance is tallied on the target-law's rows: both report
    assert list(by_id) == ["trees.conditional[star]", "trees.target-law[star]", "trees.acceptance[star]"]
    conditional, acceptance = by_id["trees.conditional[star]"], by_id["trees.acceptance[star]"]
    assert conditional.status == "skip" and "declares no algorithm" in (conditional.message or "")
    # on candidates drawn from the draft, SpecInfer accepts more than a verifier that ignores the draft
    assert (
        acceptance.status == "fail"
        and acceptance.finding == "suboptimal"
        and acceptance.evidence["held_to"] == "specinfer"
    )


def test_the_generated_tree_search_shrinks_a_failure_to_the_smallest_tree() -> None:
    member = TREE_MEMBERS["tree-coin-zero-accepts-zero-mass"]
    [result] = specverify.check(member, budget="quick", seed=0, select=["trees.output[[]generated]"]).checks
    assert result.status == "fail" and result.finding == "support" and result.evidence["violation"] == "zero-target"
    case = result.evidence["tree_case"]  # a root and one child of target probability 0, accepted on a coin of 0
    assert case["parents"] == [-1, 0] and case["path"] == [0, 1] and case["breaks_at"] == 1


def test_a_verifier_emitting_no_token_is_its_own_violation() -> None:
    member = TREE_MEMBERS["tree-no-token-after-a-leaf"]
    [result] = specverify.check(member, budget="quick", seed=0, select=["trees.output[[]shapes]"]).checks
    assert result.status == "fail" and result.finding == "contract" and result.evidence["violation"] == "no-token"
    assert "emitted no token" in (result.message or "") and "outside" not in (result.message or "")


def test_a_lossless_verifier_accepting_more_is_never_lossy() -> None:
    """Prefix matching tries a duplicate sibling's subtree too: it accepts more than target-only
    (too little more for quick to see on these models), its law exact: conformant, nothing fails."""
    member = TREE_MEMBERS["tree-prefix-matching-accepts-more"]
    result = specverify.check(member, budget="quick", seed=0)
    assert result.verdict == member.verdict, [
        (c.id, c.status, c.message) for c in result.checks if c.status not in ("pass", "skip")
    ]
    assert not [c for c in result.checks if c.status == "fail"]


def _mislabelled() -> object:
    from specverify._calling.tree import tree_sampler
    from specverify.samplers import tree_specinfer

    @tree_sampler(algorithm="target-only", uniforms=True)
    def specinfer_declared_target_only(tree, generator=None, *, uniforms=None):  # type: ignore[no-untyped-def]
        return tree_specinfer(tree, generator, uniforms=uniforms)

    return specinfer_declared_target_only


def test_accepting_more_than_the_declared_algorithm_is_information_not_a_failure() -> None:
    result = specverify.check(
        _mislabelled(), budget="quick", seed=0, select=["trees.acceptance[[]star]"], isolation="in-process"
    )
    target_law, acceptance = result.checks
    assert target_law.id == "trees.target-law[star]" and target_law.status == "pass"
    assert (
        acceptance.evidence["tallied_with"] == target_law.id and acceptance.samples == target_law.samples
    )  # one draw, two tests
    assert acceptance.status == "pass" and acceptance.finding is None and acceptance.evidence["accepts_more"] is True
    assert "accepts more than 'target-only'" in (acceptance.message or "") and "information" in (
        acceptance.message or ""
    )


def test_a_different_lossless_algorithm_accepting_more_is_lossless_not_lossy() -> None:
    """SpecInfer declared as target-only: its law given the candidates is not target-only's, its
    target law holds, it accepts more: a different lossless algorithm, never ``lossy``."""
    result = specverify.check(_mislabelled(), budget="quick", seed=0, isolation="in-process")
    assert result.verdict == "lossless-suboptimal", [
        (c.id, c.status, c.message) for c in result.checks if c.status not in ("pass", "skip")
    ]
    assert {c.finding for c in result.checks if c.status == "fail"} == {"non-canonical"}
    assert "accepts more" in (result.verdict_reason or "")


def test_a_law_test_flagging_an_outcome_of_probability_0_says_so_in_words() -> None:
    """The token-wise residual emits a token the weighted residual forbids: proof, no TV involved."""
    member = TREE_MEMBERS["tree-block-verification-token-wise-residual"]
    [result] = specverify.check(
        member, budget="quick", seed=0, select=["trees.conditional[[]weighted-residual]"]
    ).checks
    assert result.status == "fail" and result.evidence["test"] == "impossible"
    assert "outcomes of probability 0 under the declared algorithm's law were emitted" in (result.message or "")
    assert "TV" not in (result.message or "") and result.min_detectable_tv is None


def test_law_checks_pose_a_without_replacement_sampler_only_trees_its_drafter_can_produce() -> None:
    from specverify.checks._tree_cases import (
        CONDITIONAL_KINDS,
        ROBUSTNESS_KINDS,
        WITHOUT_REPLACEMENT,
        fixed_tree,
        outside_drafting,
    )

    for seed in range(8):
        for kind in CONDITIONAL_KINDS:
            tree = fixed_tree(kind, seed, WITHOUT_REPLACEMENT)
            assert (outside_drafting(tree, WITHOUT_REPLACEMENT) is None) == (kind not in ROBUSTNESS_KINDS), (kind, seed)
        for kind in ROBUSTNESS_KINDS:
            assert outside_drafting(fixed_tree(kind, seed, WITHOUT_REPLACEMENT), WITHOUT_REPLACEMENT) is not None
            assert (
                outside_drafting(fixed_tree(kind, seed, WITHOUT_REPLACEMENT), "specinfer") is None
            )  # i.i.d.: as posed


def test_a_without_replacement_verifier_breaking_only_on_duplicates_is_no_law_failure() -> None:
    import torch

    from specverify._trees.contract import TreeBatch
    from specverify._trees.exact import tree_law

    member = TREE_MEMBERS["tree-without-replacement-breaks-on-duplicates"]
    # it does break on duplicate siblings: the star (a, a, b), p(a) < q(a), its path ends at node 3 where the law puts
    # nothing
    target = torch.tensor([[[0.3, 0.3, 0.4]] * 4], dtype=torch.float64)
    draft = torch.tensor([[[0.6, 0.2, 0.2]] * 4], dtype=torch.float64)
    star = TreeBatch(torch.tensor([[-1, 0, 0, 0]]), torch.tensor([[-1, 0, 0, 1]]), target, draft)
    rows = 4096
    path, _ = member(
        TreeBatch(
            star.parents.expand(rows, -1),
            star.tokens.expand(rows, -1),
            target.expand(rows, -1, -1),
            draft.expand(rows, -1, -1),
        ),
        torch.Generator().manual_seed(0),
    )
    assert (
        float(tree_law(star, "without-replacement")[0, 3].sum()) == 0.0
        and int((path.amax(dim=1) == 3).sum()) > rows // 20
    )
    result = specverify.check(member, budget="quick", seed=0)
    assert result.verdict == "conformant", [
        (c.id, c.status, c.message) for c in result.checks if c.status not in ("pass", "skip")
    ]
    by_id = {c.id: c for c in result.checks}
    assert by_id["trees.conditional[duplicates]"].status == "skip" and "cannot produce" in (
        by_id["trees.conditional[duplicates]"].message or ""
    )
    robustness = by_id["trees.robustness[duplicates]"]
    assert (
        robustness.status == "pass"
        and robustness.proves == "contract"
        and "information, not a law finding" in (robustness.message or "")
    )


def test_a_failing_tree_case_carries_the_laws_at_the_nodes_involved() -> None:
    fault = specverify.check(
        TREE_MEMBERS["tree-residual-from-parent-node"], budget="quick", seed=0, select=["trees.output[[]shapes]"]
    ).checks[0]
    case = fault.evidence["tree_case"]
    assert fault.status == "fail" and [r["node"] for r in case["rows"]] == [n for n in case["path"] if n >= 0]
    assert all(len(r["target"]) == case["vocab"] and len(r["draft"]) == case["vocab"] for r in case["rows"])
    assert case["rows_of"] == "the nodes on the failing output's path" and case["smallest_difference"] > 0
    law = specverify.check(
        TREE_MEMBERS["tree-threshold-below-one"], budget="quick", seed=0, select=["trees.conditional[[]star]"]
    ).checks[0]
    case = law.evidence["tree_case"]
    assert law.status == "fail" and case["rows"][0]["node"] == 0 and "farthest from the exact law" in case["rows_of"]
    gaps = [abs(a - b) for a, b in zip(case["ends_observed"], case["ends_expected"])]
    assert case["rows"][-1]["node"] == gaps.index(max(gaps))
