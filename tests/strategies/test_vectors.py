"""Probability vectors: valid within their declared precision, of the kind asked for, simple when shrunk."""

from __future__ import annotations

import pytest
import torch
from hypothesis import find, given
from hypothesis import strategies as st

from specverify import strategies as sv

from ._helpers import assert_probability_rows, ci


@ci(150)
@given(st.data(), sv.vocab_sizes(2, 300), st.sampled_from((None, *sv.VECTOR_KINDS)), st.sampled_from(sv.PRECISIONS))
def test_every_vector_is_valid_within_its_precision(data, vocab, kind, precision):
    vector = data.draw(sv.probability_vectors(vocab, kind, precision))
    assert vector.shape == (vocab,)
    assert_probability_rows(vector[None], precision)


@pytest.mark.parametrize("kind", sv.VECTOR_KINDS)
@pytest.mark.parametrize("vocab", [4096, 32768])
@ci(4)
@given(data=st.data())
def test_llm_sized_vocabularies(data, kind, vocab):
    vector = data.draw(sv.probability_vectors(vocab, kind, "bfloat16"))
    assert vector.shape == (vocab,)
    assert_probability_rows(vector[None], "bfloat16")
    assert len(set(vector.tolist())) > 1 or kind in ("uniform", "smooth", "dyadic")


def _is(kind: str, v: torch.Tensor) -> bool:
    """The defining property of each vector kind."""
    positive = v > 0
    if kind == "smooth":
        return bool(positive.all()) and float(v.max() / v.min()) <= 256
    if kind == "uniform":
        return bool((v == v[0]).all())
    if kind == "one-hot":
        return int(positive.sum()) == 1 and float(v.max()) == 1.0
    if kind == "peaked":
        return float(v.max()) >= 64 / 72 and bool(positive.all())
    if kind == "sparse":
        return bool(positive.any()) and not bool(positive.all())
    if kind == "dyadic":
        scaled = v * 2.0**30
        return float(v.sum()) == 1.0 and bool((scaled == scaled.round()).all())
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", sv.VECTOR_KINDS)
@ci(40)
@given(data=st.data())
def test_each_kind_has_its_defining_property(data, kind):
    vocab = data.draw(sv.vocab_sizes(2, 64))
    assert _is(kind, data.draw(sv.probability_vectors(vocab, kind)))


@pytest.mark.parametrize("kind", ["smooth", "peaked", "one-hot", "sparse", "dyadic"])
def test_each_kind_is_produced_when_none_is_asked_for(kind):
    # uniform is left out: a smooth vector of equal weights is uniform too
    found = find(sv.probability_vectors(max_vocab=6), lambda v: v.numel() >= 4 and _is(kind, v), settings=ci(2000))
    assert _is(kind, found)


def test_large_vocabularies_are_drawn():
    assert find(sv.probability_vectors(max_vocab=4096), lambda v: v.numel() > 1000, settings=ci(2000)).numel() > 1000


@pytest.mark.parametrize("precision", sv.LOW_PRECISIONS)
def test_low_precision_vectors_are_not_renormalised(precision):
    # rounding moves the sum away from 1; an engine's bf16 softmax output does the same
    found = find(sv.probability_vectors(7, "smooth", precision), lambda v: float(v.sum()) != 1.0, settings=ci(500))
    assert torch.equal(sv.round_to(found, precision), found)


SIMPLEST = {
    "smooth": [0.2] * 5,
    "uniform": [0.2] * 5,
    "one-hot": [1.0, 0, 0, 0, 0],
    "sparse": [1.0, 0, 0, 0, 0],
    "peaked": [321 / 325, 1 / 325, 1 / 325, 1 / 325, 1 / 325],
    "dyadic": [0.5, 0.125, 0.125, 0.125, 0.125],
}


@pytest.mark.parametrize("kind", sv.VECTOR_KINDS)
def test_each_kind_shrinks_to_its_simplest_vector(kind):
    found = find(sv.probability_vectors(5, kind), lambda v: True, settings=ci(10))
    assert found.tolist() == pytest.approx(SIMPLEST[kind], abs=1e-15)


def test_vocab_sizes_shrink_to_two():
    assert find(sv.vocab_sizes(2, 4096), lambda v: True, settings=ci(10)) == 2


@pytest.mark.parametrize(
    "call",
    [
        lambda: sv.probability_vectors(1),
        lambda: sv.probability_vectors(4, "spiky"),
        lambda: sv.probability_vectors(4, precision="float8"),
        lambda: sv.vocab_sizes(1, 4),
        lambda: sv.probability_rows(-1, 4),
    ],
)
def test_bad_arguments_are_refused_when_the_strategy_is_made(call):
    with pytest.raises(ValueError):
        call()
