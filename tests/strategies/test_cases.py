"""Step cases and batches: well-formed, drafts in the draft's support, precision as declared."""

from __future__ import annotations

import pytest
import torch
from hypothesis import find, given
from hypothesis import strategies as st

from specverify import strategies as sv
from specverify.replay import StepCase

from ._helpers import assert_probability_rows, ci, examples
from .test_pairs import holds


def assert_step_case(case: StepCase, kind: str) -> None:
    k, vocab = case.k, case.vocab_size
    assert case.target_probs.shape == (k + 1, vocab)
    assert case.draft_probs.shape == (k, vocab)
    assert case.draft_tokens.dtype == torch.int64
    rows = torch.arange(k)
    assert (case.draft_probs[rows, case.draft_tokens] > 0).all(), "a draft token outside the draft's support"
    assert case.precision in sv.PRECISIONS
    assert_probability_rows(case.target_probs, case.precision)
    for tensor in (case.target_probs, case.draft_probs):
        assert torch.equal(sv.round_to(tensor, case.precision), tensor), "not exact in the declared precision"
    assert case.label == kind or (kind == sv.MIXED and case.label in sv.STEP_KINDS)
    for position in range(k):
        assert holds(case.label, case.target_probs[position], case.draft_probs[position], case.precision)


@pytest.mark.parametrize("kind", [*sv.STEP_KINDS, sv.MIXED])
@ci(15)
@given(data=st.data())
def test_every_step_case_is_well_formed(data, kind):
    assert_step_case(data.draw(sv.step_cases(max_vocab=12, max_k=5, kind=kind)), kind)


@pytest.mark.parametrize("kind", ["random", "low-precision", "disjoint", sv.MIXED])
@ci(15)
@given(data=st.data())
def test_a_batch_shares_its_shape_and_precision(data, kind):
    batch = data.draw(sv.step_batches(max_vocab=8, max_k=4, max_cases=4, kind=kind))
    assert 1 <= len(batch) <= 4
    assert len({case.shape_key for case in batch}) == 1
    assert len({case.precision for case in batch}) == 1, "the harness passes one batch in one dtype"
    for case in batch:
        assert_step_case(case, kind)


@ci(20)
@given(sv.step_cases(kind="low-precision"))
def test_low_precision_cases_name_the_precision_they_are_exact_in(case):
    assert case.precision in sv.LOW_PRECISIONS


def test_mixed_batches_produce_every_kind_and_precision():
    batches = examples(sv.step_batches(kind=sv.MIXED), 200)
    assert {c.label for b in batches for c in b} == set(sv.MIXABLE_STEP_KINDS)
    assert {b[0].precision for b in batches} == set(sv.PRECISIONS)
    assert any(len({c.label for c in b}) >= 3 for b in batches), "no batch with rows of three kinds"


@pytest.mark.parametrize("precision", sv.LOW_PRECISIONS)
def test_a_precision_can_be_asked_for(precision):
    case = find(sv.step_cases(kind="random", precision=precision), lambda c: c.k >= 2, settings=ci(100))
    assert case.precision == precision
    assert_step_case(case, "random")


def test_fixed_shapes_are_kept():
    assert {c.shape_key for c in examples(sv.step_cases(vocab_size=5, k=3), 5)} == {(3, 5)}
    for empty in examples(sv.step_cases(vocab_size=3, k=0), 5):
        assert empty.draft_tokens.shape == (0,) and empty.target_probs.shape == (1, 3)


@pytest.mark.parametrize("kind", ["crossed-supports", "draft-narrower", "one-ulp"])
def test_large_vocabulary_step_cases(kind):
    for case in examples(sv.step_cases(vocab_size=4096, max_k=2, kind=kind, precision="bfloat16"), 3):
        assert_step_case(case, kind)


@pytest.mark.parametrize(
    "call",
    [
        lambda: sv.step_cases(kind="bogus"),
        lambda: sv.step_cases(kind="low-precision", precision="float64"),
        lambda: sv.step_cases(precision="float8"),
        lambda: sv.step_batches(max_cases=0),
    ],
)
def test_bad_arguments_are_refused(call):
    with pytest.raises(ValueError):
        call()
