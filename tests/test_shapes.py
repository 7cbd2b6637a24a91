"""The shapes family: structured production-shape cases, float edges as laws, full-size uniform grids.

Small, exact tests: the cases' structure, the exact law's zero-residual convention, the uniform
grid at full size, and one bug of each kind caught at a small shape of the same structure.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

import specverify
from specverify._budgets import get_budget
from specverify._calling.sut import SamplerUnderTest
from specverify._contract import Capabilities
from specverify._laws.cases import StepCase
from specverify._laws.exact import step_law_scalar
from specverify._record.evidence import unknown_keys
from specverify._record.reach import Reach, guarantee
from specverify._record.result import CheckResult
from specverify.checks import Context
from specverify.checks._event import draft_event, event_size, sized_status
from specverify.checks._shapes import (
    CONDITIONAL_SHAPES,
    TARGET_SHAPES,
    EdgeLawCheck,
    FullSizeGridCheck,
    Shape,
    ShapeConditionalCheck,
    lumped_law,
    prefix_grid,
)
from specverify.samplers._reference import canonical_emit
from specverify.strategies._internal.shapes import active_tokens, boundary_ids, cell_map, edge_case, structured_case
from specverify.zoo import ZOO

QUICK = get_budget("quick")


def _run(check, sampler, budget=QUICK):
    ctx = Context(sut=SamplerUnderTest(sampler, timeout=60.0), budget=budget, seed=0, alpha=1e-4)
    return check.run(ctx)


def test_structured_cases_put_mass_across_boundaries_with_lumped_tails():
    vocab = 70_000
    case = structured_case(vocab, 3, seed=1)
    assert torch.allclose(case.target_probs.sum(-1), torch.ones(4, dtype=torch.float64), atol=1e-6)
    active = active_tokens(case)
    assert vocab - 1 in active and (active >= 32_768).any()
    assert set(active.tolist()) <= set(boundary_ids(vocab))
    cells, labels = cell_map(active, vocab)
    assert cells.min() == 0 and cells.max() == len(labels) - 1  # every token in exactly one cell
    assert len(labels) <= active.numel() + 6  # the tail lumped by range: cells do not grow with V
    law = lumped_law(case, cells, len(labels))
    assert abs(law.sum() - 1) < 1e-12 and law.size == 4 * len(labels)


def test_the_exact_law_draws_from_the_target_when_the_residual_rounds_to_zero():
    case = edge_case("sub-ulp-residual", 9)
    law = case.law()
    assert abs(float(law[0].sum()) - 0.5) < 1e-12  # the tail draft is rejected half the time ...
    assert float(law[0, 8]) > 0.5 - 1e-12  # ... and the token drawn from p: the dominant one
    p = [[Fraction(x) for x in row] for row in case.target_probs.tolist()]
    q = [[Fraction(x) for x in row] for row in case.draft_probs.tolist()]
    exact = step_law_scalar(p, q, case.draft_tokens.tolist())  # Fractions follow the same convention
    assert max(abs(float(exact[j][t]) - float(law[j, t])) for j in range(3) for t in range(9)) < 1e-15


def test_edge_laws_size_a_wrong_fallback_by_its_drafts_and_keep_support_violations():
    check = EdgeLawCheck(kinds=("sub-ulp-residual", "zeros-next-to-sub-ulp", "small-residual"), vocab=65, rows=512)
    assert all(r.status == "pass" for r in _run(check, specverify.reference))
    for name in ("zero-residual-token-zero", "zero-residual-uniform"):
        law, support, _ = _run(check, ZOO[name])
        # the law given a first draft of probability ~1e-20 moves; the emitted law cannot
        assert law.status == "float-edge" and law.finding is None and law.proves == "non-canonical"
        event = law.evidence["event"]
        assert event["tv_given"] > 0.1 and event["tv_bound"] < 1e-16 and "float-edge finding" in (law.message or "")
        assert not unknown_keys(law.evidence)
        assert support.status == "fail" and support.finding == "support"  # a forbidden token, whatever its frequency


def test_the_bound_is_the_probability_of_drafts_as_rare_as_the_case_s_rarest():
    case = edge_case("zeros-next-to-sub-ulp", 65)
    q = [[Fraction(x) for x in row] for row in case.draft_probs.tolist()]
    first = [x / sum(q[0]) for x in q[0]]
    exact = sum(x for x in first if x <= first[int(case.draft_tokens[0])])  # every sub-ulp tail of row 0
    log10_p, words = draft_event(case)
    assert abs(log10_p - math.log10(exact)) < 1e-12 and "position 0" in words and "1.6e-20" in words
    assert first[int(case.draft_tokens[0])] < exact < 1e-17  # never below the forced draft's own probability
    size = event_size(case, 0.5)
    assert size["tv_bound"] == size["probability"] and sized_status(size) == "float-edge" and size["tv_given"] == 0.5
    # logarithms where the probability underflows a float
    p = torch.full((3, 8), 1.0, dtype=torch.float64)
    q2 = torch.zeros((2, 8), dtype=torch.float64)
    q2[:, 0], q2[:, 1] = 1e-320, 1.0
    tiny = StepCase(p, q2, torch.zeros(2, dtype=torch.int64))
    assert draft_event(tiny)[0] < -300 and sized_status(event_size(tiny, 1.0)) == "float-edge"
    # an ordinary case's rarest draft holds a few tenths of its row: it decides as before
    ordinary = event_size(structured_case(1_025, 16, seed=3, accept_until=15, actives=2), 0.05)
    assert ordinary["probability"] > 0.05 and sized_status(ordinary) == "fail"


def test_small_residual_case_sits_between_float_noise_and_1e_12():
    case = edge_case("small-residual", 1_025)
    p = case.target_probs[0] / case.target_probs[0].sum()
    q = case.draft_probs[0] / case.draft_probs[0].sum()
    mass = float((p - q).clamp_min(0).sum())
    assert 1_025 * torch.finfo(torch.float64).eps < mass < 1e-12
    assert float(case.law()[0, 1]) > 1 - 1e-9  # rejected always, token 1 the residual's one token


def test_prefix_grid_induces_the_exact_law_at_full_size():
    case = structured_case(40_000, 4, seed=2, tail_mass=(0.1, 0.3), bonus_tail=0.0, accept_until=2)
    uniforms, volume, skipped = prefix_grid(case)
    assert uniforms.shape[0] < 5 * 8  # K + 1 prefixes times a few residual tokens, whatever V
    assert abs(float(volume.sum()) + skipped - 1) < 1e-12
    tokens, accepted = canonical_emit(*case.batch(uniforms.shape[0]), uniforms)
    induced = torch.zeros(5 * 40_000, dtype=torch.float64)
    induced.index_add_(0, accepted * 40_000 + tokens.gather(1, accepted[:, None])[:, 0], volume)
    assert 0.5 * float((induced - case.law().reshape(-1)).abs().sum()) <= skipped + 1e-12


def test_full_size_grid_catches_an_index_wrap_that_the_reference_does_not_have():
    check = FullSizeGridCheck(shapes=((40_000, 2),))
    assert [r.status for r in _run(check, specverify.reference)] == ["pass"]

    def wraps(t, d, y, g, *, uniforms=None):
        tokens, n = specverify.reference(t, d, y, g, uniforms=uniforms)
        return torch.where(tokens >= 32_768, tokens % 32_768, tokens), n

    wraps.capabilities = Capabilities(uniforms=True)
    (result,) = _run(check, wraps)
    # an accepted draft id past 32,767 comes back as another token (the audit's contract), or the
    # wrapped id lands on a token the bonus row forbids (support) or off the exact law (the grid)
    assert result.status == "fail" and result.finding in ("contract", "non-canonical", "support")


def test_conditional_shapes_catch_a_fixed_per_position_array_and_state_their_reach():
    check = ShapeConditionalCheck(shapes=(Shape(33, 16, accept_until=8, actives=2),))
    ok, skipped_full = _run(check, specverify.reference)
    assert ok.status == "pass" and ok.reach.k == (16, 16) and ok.reach.vocab == (33, 33)
    assert skipped_full.status == "skip"  # the full-domain test belongs to thorough
    (bug, _) = _run(check, ZOO["fixed-position-arrays"])
    assert bug.status == "fail" and bug.finding == "non-canonical"


def test_the_bonus_case_reaches_the_bonus_row_after_long_drafts_and_catches_a_wrong_row():
    # the first case at K = 16 takes the bonus one row in 256; the tagged one half the time
    plain, bonus = (structured_case(33, 16, seed=3, accept_until=u, actives=2) for u in (8, 15))
    assert plain.law()[16].sum() < 0.01 and bonus.law()[16].sum() > 0.3
    assert [s.label for s in CONDITIONAL_SHAPES[:2]] == ["1025x16", "1025x16-bonus"]
    assert len({(s.vocab, s.k) for s in TARGET_SHAPES}) == len(TARGET_SHAPES)  # one target-law shape per (V, K)
    check = ShapeConditionalCheck(shapes=(Shape(33, 16, accept_until=15, actives=2, tag="bonus"),))
    ok, _ = _run(check, specverify.reference)
    assert ok.status == "pass" and ok.id == "shapes.conditional[33x16-bonus]"
    (bug, _) = _run(check, ZOO["bonus-from-last-draft-row-at-long-k"])
    assert bug.status == "fail" and bug.finding == "non-canonical"
    (missed, _) = _run(
        ShapeConditionalCheck(shapes=(Shape(33, 16, accept_until=8, actives=2),)),
        ZOO["bonus-from-last-draft-row-at-long-k"],
    )
    assert missed.status == "pass"  # what the tagged case is for: the plain one does not see it


def test_the_full_domain_law_runs_where_the_budget_asks_and_passes_the_reference():
    check = ShapeConditionalCheck(shapes=(Shape(33, 2, accept_until=1, actives=2),))
    _, full = _run(check, specverify.reference, budget=QUICK.with_(shape_full_domain=True))
    assert full.id == "shapes.full-law[1025x2]" and full.status == "pass", full.message
    assert full.samples > 0 and full.evidence["batches"] > 1 and full.evidence["cells"] == 3 * 1025
    assert full.reach is not None and full.reach.vocab == (1025, 1025)


def test_guarantee_states_each_claim_on_its_own_reach():
    def result(tv, vocab):
        reach = Reach(vocab=(2, vocab), k=(1, 4), batch=(1, 512), rows=10, dtypes=("float32",), shapes=((1, vocab),))
        return CheckResult(id=f"x{vocab}", family="fit", status="pass", min_detectable_tv=tv, reach=reach)

    single = guarantee([result(0.0137, 8), result(0.012, 4)], power=0.99, alpha=1e-4)
    assert single.startswith("every statistical check detects TV >= 0.0137 with probability >= 0.99 on V in 2..8")
    line = guarantee([result(0.0137, 8), result(0.3, 262_144)], power=0.99, alpha=1e-4)
    assert "TV >= 0.0137 on V in 2..8" in line and "TV >= 0.3 on V in 2..262144" in line
    same = guarantee(
        [result(0.0244, 1025), result(0.0971, 1025)], power=0.99, alpha=1e-4
    )  # one V: one clause, its worst claim
    assert same.startswith("every statistical check detects TV >= 0.0971 with probability >= 0.99 on V in 2..1025")
    exact = guarantee([result(0.0, 3), result(0.3, 262_144)], power=0.99, alpha=1e-4)  # a class of exact checks alone
    assert "any deviation (exact) on V in 2..3" in exact and "TV >= 0 " not in exact


def test_after_a_hang_the_family_makes_no_further_call():
    import threading

    from specverify.checks._robustness import LargeVocabCheck

    calls = []

    def hangs_above_1000(t, d, y, g):
        calls.append(t.shape[-1])
        if t.shape[-1] > 1_000:
            threading.Event().wait(20)
        return specverify.reference(t, d, y, g)

    sut = SamplerUnderTest(hangs_above_1000, timeout=1.0)
    ctx = Context(sut=sut, budget=QUICK, seed=0, alpha=1e-4)
    (hung,) = [LargeVocabCheck(vocabularies=(4096,)).run(ctx)]
    assert hung.status == "fail" and hung.evidence["violation"] == "hang"
    before = len(calls)
    results = ShapeConditionalCheck(shapes=(Shape(1_025, 2),)).run(ctx)
    assert len(calls) == before  # no call beside the hung one
    assert [r.status for r in results] == ["skip", "skip"] and "hang" in results[0].message


def test_target_law_at_shapes_finds_loss_and_passes_the_reference():
    from specverify.checks._shapes import ShapeTargetLawCheck

    check = ShapeTargetLawCheck(shapes=(Shape(40, 2, actives=3),))
    passed = _run(check, specverify.reference)
    assert [r.status for r in passed] == ["pass", "pass", "pass"]
    assert all(unknown_keys(r.to_json()["evidence"]) == [] for r in passed)  # the per-shape records too
    first, _, _ = _run(check, ZOO["wrong-from-nine-tokens"])
    assert first.status == "fail" and first.finding == "loss"
    *_, acceptance = _run(check, ZOO["sample-and-compare"])
    assert acceptance.status == "fail" and acceptance.finding == "suboptimal"
