"""Model cases and batches: laws that depend on the draft prefix, tables within their precision."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specverify import strategies as sv
from specverify._laws.models import draw_drafts, step_inputs
from specverify._seeds import derive_seed
from specverify.models import ChainModel, TableModel
from specverify.replay import ModelCase

from ._helpers import assert_probability_rows, ci, examples
from .test_pairs import holds


def assert_model_case(case: ModelCase, kind: str, max_vocab: int, max_k: int, max_cells: int) -> None:
    vocab, k, model = case.vocab_size, case.k, case.model
    assert 2 <= vocab <= max_vocab and 1 <= k <= max_k
    assert k == 1 or vocab ** (k + 1) <= max_cells
    assert case.label == kind or (kind == sv.MIXED and case.label in sv.MIXABLE_MODEL_KINDS)
    assert case.precision in sv.PRECISIONS
    if case.label == "chain":
        assert isinstance(model, ChainModel)
        assert 1 <= model.order <= sv.MAX_CHAIN_ORDER
        assert model.order == 1 or vocab ** (model.order + 1) <= max_cells
        assert len(model.context) == model.order and all(0 <= t < vocab for t in model.context)
        pairs = [(model.target_table, model.draft_table)]
        relation = "random"
    else:
        assert isinstance(model, TableModel) and model.max_depth == k
        pairs = list(zip(model.target_tables, model.draft_tables))
        assert_probability_rows(model.target_tables[-1], case.precision)
        relation = case.label
    for target, draft in pairs:
        assert_probability_rows(target, case.precision)
        assert torch.equal(sv.round_to(draft, case.precision), draft)
        assert (draft > 0).any(dim=-1).all(), "a draft law with no token to draft"
        for p, q in zip(target, draft):
            assert holds(relation, p, q, case.precision)


@pytest.mark.parametrize("kind", [*sv.MODEL_KINDS, sv.MIXED])
@ci(10)
@given(data=st.data())
def test_every_model_case_is_well_formed(data, kind):
    case = data.draw(sv.model_cases(max_vocab=5, max_k=4, kind=kind, max_cells=625))
    assert_model_case(case, kind, 5, 4, 625)


@pytest.mark.parametrize("kind", ["random", "chain", "low-precision"])
@ci(10)
@given(data=st.data())
def test_the_batterys_model_cases(data, kind):
    # what fit.first-token / fit.step / fit.position ask for
    case = data.draw(sv.model_cases(max_vocab=4, max_k=3, kind=kind, max_cells=256))
    assert_model_case(case, kind, 4, 3, 256)
    if kind == "low-precision":
        assert case.precision in sv.LOW_PRECISIONS


def _depends_on_prefix(case: ModelCase) -> bool:
    """Whether the target's law at position 1 differs between two draft tokens at position 0."""
    laws = case.model.target(torch.arange(case.vocab_size)[:, None])
    return bool((laws != laws[:1]).any())


@pytest.mark.parametrize("kind", ["random", "chain", "disjoint"])
def test_the_law_depends_on_the_draft_prefix(kind):
    cases = examples(sv.model_cases(kind=kind), 30)
    assert any(_depends_on_prefix(case) for case in cases)


def test_chains_of_every_order_are_produced():
    cases = examples(sv.model_cases(kind="chain", max_vocab=3, max_cells=81), 60)
    assert {case.model.order for case in cases} == {1, 2, 3}


@ci(10)
@given(sv.model_cases(kind=sv.MIXED, max_vocab=4, max_k=3))
def test_the_harness_draws_drafts_inside_the_draft_support(case):
    generator = torch.Generator().manual_seed(derive_seed("tests.strategies", case.fingerprint()))
    drafts = draw_drafts(case.model, 64, case.k, generator)
    target, draft = step_inputs(case.model, drafts)
    assert target.shape == (64, case.k + 1, case.vocab_size)
    assert (draft.gather(-1, drafts[..., None]) > 0).all()


@pytest.mark.parametrize("kind", ["random", "low-precision", sv.MIXED])
@ci(10)
@given(data=st.data())
def test_a_model_batch_shares_its_shape_and_precision(data, kind):
    batch = data.draw(sv.model_batches(max_vocab=4, max_k=3, max_models=4, kind=kind, max_cells=256))
    assert 1 <= len(batch) <= 4
    assert len({(case.k, case.vocab_size, case.precision) for case in batch}) == 1
    for case in batch:
        assert_model_case(case, kind, 4, 3, 256)


def test_mixed_model_batches_hold_different_models():
    batches = examples(sv.model_batches(kind=sv.MIXED), 300)
    assert {c.label for b in batches for c in b} == set(sv.MIXABLE_MODEL_KINDS)
    assert any({type(c.model) for c in b} == {ChainModel, TableModel} for b in batches)


def test_large_models_stay_within_hypothesis_buffer():
    # 8 tokens, K up to 4: tables of thousands of rows, still a few draws each and no overrun
    cases = examples(sv.model_cases(max_vocab=8, max_k=4, max_cells=4096), 20)
    assert len(cases) == 20
    assert max(sum(t.shape[0] for t in c.model.target_tables) for c in cases) > 500
    for case in cases:
        assert_model_case(case, "random", 8, 4, 4096)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        sv.model_cases(kind="spline")
    with pytest.raises(ValueError):
        sv.model_cases(max_order=0)
    with pytest.raises(ValueError):
        sv.model_batches(max_models=0)
