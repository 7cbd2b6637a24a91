"""Target/draft pairs: each kind holds the relation it names, at every precision."""

from __future__ import annotations

import pytest
import torch
from hypothesis import find, given
from hypothesis import strategies as st

from specverify import strategies as sv

from ._helpers import assert_probability_rows, ci, support


def _ulp_neighbours(p: torch.Tensor, precision: str) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = getattr(torch, precision)
    low = p.to(dtype)
    return (
        torch.nextafter(low, torch.zeros_like(low)).to(torch.float64),
        torch.nextafter(low, torch.ones_like(low)).to(torch.float64),
    )


def holds(kind: str, p: torch.Tensor, q: torch.Tensor, precision: str) -> bool:
    """The relation each pair kind names."""
    sp, sq = support(p), support(q)
    vocab = p.numel()
    if kind in ("random", "low-precision"):
        return True
    if kind == "equal":
        return torch.equal(p, q)
    if kind == "one-ulp":
        down, up = _ulp_neighbours(p, precision)
        return bool(((q == p) | (q == down) | (q == up)).all()) and torch.equal(p == 0, q == 0)
    if kind == "within-1e-6":
        return float((q - p).abs().max()) <= 1e-6 and sp == sq
    if kind == "near-equal":
        return any(holds(k, p, q, precision) for k in sv.NEAR_EQUAL_KINDS)
    if kind == "zero-residual":
        # equal once normalised, the draft's total above 1 (rounding may lose the excess)
        return torch.allclose(q / q.sum(), p / p.sum(), rtol=0, atol=1e-2 if precision != "float64" else 1e-12)
    if kind == "disjoint":
        return not (sp & sq)
    if kind == "zeros":
        return len(sp) < vocab and len(sq) < vocab
    if kind == "one-hot":
        return len(sp) == 1 and float(p.max()) == 1.0
    if kind == "draft-wider":
        return sp < sq
    if kind == "draft-narrower":
        return sq < sp
    if kind == "crossed-supports":
        if vocab == 2:
            return not (sp & sq)
        return bool(sp - sq) and bool(sq - sp) and bool(sp & sq)
    if kind == "overconfident":
        return sq <= sp and float((q / q.sum()).max()) >= float((p / p.sum()).max()) - 1e-2
    if kind == "flat-draft":
        eps = torch.finfo(getattr(torch, precision)).eps  # rounding may widen the spread
        return sq == set(range(vocab)) and float(q.max() / q.min()) <= 263 / 256 * (1 + eps) ** 2
    if kind == "sub-ulp":
        # one dominant token shared by both; every tail of the draft at least the target's
        top = int(p.argmax())
        tails = [t for t in range(vocab) if t != top]
        return int(q.argmax()) == top and float(p[tails].max()) <= 1e-7 and bool((q[tails] >= p[tails]).all())
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", sv.PAIR_KINDS)
@ci(25)
@given(data=st.data())
def test_each_pair_kind_holds_its_relation(data, kind):
    precision = data.draw(st.sampled_from(sv.LOW_PRECISIONS if kind == "low-precision" else sv.PRECISIONS))
    vocab = data.draw(sv.vocab_sizes(2, 40))
    p, q = data.draw(sv.target_draft_pairs(vocab, kind, precision))
    assert_probability_rows(p[None], precision)
    # a one-ulp draft is one ulp off each entry: not a rounded probability vector, and holds()
    # checks it for what it is; a zero-residual draft is the target scaled up by an ulp or two,
    # normalised as well as its dtype allows (rows far from normalised are a declared capability)
    if kind not in ("one-ulp", "near-equal"):
        assert_probability_rows(q[None], precision)
    assert torch.equal(sv.round_to(q, precision), q)
    assert (q > 0).any()
    assert holds(kind, p, q, precision)


@pytest.mark.parametrize(
    ("kind", "nontrivial"),
    [
        ("one-ulp", lambda p, q: not torch.equal(p, q)),
        ("within-1e-6", lambda p, q: not torch.equal(p, q)),
        ("near-equal", lambda p, q: torch.equal(p, q)),
        ("near-equal", lambda p, q: 0 < float((p - q).abs().max()) < 1e-12),
        ("crossed-supports", lambda p, q: p.numel() >= 3),
        ("overconfident", lambda p, q: float(q.max()) > float(p.max()) + 0.1),
        ("zero-residual", lambda p, q: float(q.sum()) > 1.0),
        ("sub-ulp", lambda p, q: 0 < float(p.min()) < 1e-16),
    ],
)
def test_each_relation_is_produced_for_real(kind, nontrivial):
    p, q = find(sv.target_draft_pairs(kind=kind), lambda pq: nontrivial(*pq), settings=ci(500))
    assert holds(kind, p, q, "float64")


@pytest.mark.parametrize("precision", sv.LOW_PRECISIONS)
def test_one_ulp_is_an_ulp_of_the_declared_precision(precision):
    p, q = find(sv.target_draft_pairs(5, "one-ulp", precision), lambda pq: not torch.equal(*pq), settings=ci(200))
    assert torch.equal(sv.round_to(q, precision), q)
    assert holds("one-ulp", p, q, precision)


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown pair kind"):
        sv.target_draft_pairs(kind="nearly")
