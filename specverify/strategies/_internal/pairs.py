"""Target/draft pairs: how the draft's law sits against the target's at one position.

Each *pair kind* names a relation real engines meet (a draft equal to the target up to rounding, a
draft that forbids tokens the target allows, an over-confident draft, ...).  A pair is drawn for
many positions at once, ``(P [R, V], Q [R, V])``, so one strategy serves a single step (``R = K+1``)
and a whole table model (``R`` = every prefix) alike, in a few draws.

Every ``Q`` row has at least one positive entry, so a draft token can always be drawn from it.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st

from .vectors import PRECISIONS, _probability_rows, draw_bytes, normalise_rows, round_normalised, round_to, vocab_sizes

__all__ = ["FAR_SCALES", "NEAR_EQUAL_KINDS", "PAIR_KINDS", "pair_rows", "target_draft_pairs"]

#: The three ways a draft is "the same" as its target, which ``near-equal`` draws among.
NEAR_EQUAL_KINDS = ("equal", "one-ulp", "within-1e-6")

#: Every pair kind.  The first seven are the original families the battery names.
PAIR_KINDS = (
    "random",  # independent target and draft, each of any vector kind
    "near-equal",  # one of NEAR_EQUAL_KINDS
    "zero-residual",  # draft = target x (1 + an ulp or two): equal once normalised, residual mass exactly 0
    "low-precision",  # smooth laws rounded to bf16, fp16 or fp32, each row's sum as close to 1 as that allows
    "disjoint",  # supports share no token
    "zeros",  # both sparse (exact zeros in each)
    "one-hot",  # one-hot target, any draft
    *NEAR_EQUAL_KINDS,
    "draft-wider",  # supp(target) strictly inside supp(draft): drafts the target forbids
    "draft-narrower",  # supp(draft) strictly inside supp(target): q(y) = 0 where p(y) > 0
    "crossed-supports",  # both of the above at once, sharing a token (disjoint when V = 2)
    "overconfident",  # draft = target sharpened (q ~ p**g, g in 2, 4, 16)
    "flat-draft",  # draft within 3% of uniform, any target
    "sub-ulp",  # one dominant token, tails far below float32 resolution, the draft's tails twice the target's
)

#: The draft of a ``zero-residual`` pair is the target scaled by one of these: every entry moves up
#: by an ulp or two, so the residual ``[p - q]_+`` is exactly 0 while the row stays normalised as
#: well as float64 allows (engines pass no float32 row that sums to 1.01; rows far from normalised
#: are :data:`FAR_SCALES`, given only to samplers that declare ``unnormalised=True``).
_ZERO_RESIDUAL_SCALES = (1.0 + 2.0**-52, 1.0 + 2.0**-51)

#: Row scales far from 1, for samplers that declare they renormalise their inputs.
FAR_SCALES = (1.01, 0.99, 2.0, 0.5, 1000.0)
_SHARPENING = (2.0, 4.0, 16.0)
_SUB_ULP_TAILS = (1e-8, 1e-17)


def _smooth(draw: st.DrawFn, rows: int, vocab: int) -> np.ndarray:
    return draw_bytes(draw, (rows, vocab)) + 1.0


def _any(draw: st.DrawFn, rows: int, vocab: int) -> np.ndarray:
    return draw(_probability_rows(rows, vocab, None, "float64")).numpy()


def _support_mask(draw: st.DrawFn, rows: int, vocab: int) -> np.ndarray:
    """``[R, V]`` bool, each row with at least one ``True`` and one ``False`` (shrinks to token 0 only)."""
    mask = (draw_bytes(draw, (rows, vocab)) & 1).astype(bool)
    mask[~mask.any(axis=1), 0] = True
    mask[mask.all(axis=1), -1] = False
    return mask


def _token_classes(draw: st.DrawFn, rows: int, vocab: int) -> np.ndarray:
    """``[R, V]`` in {0 shared, 1 target only, 2 draft only}, every class present (needs V >= 3)."""
    classes = draw_bytes(draw, (rows, vocab)).astype(np.int64) % 3
    index = np.arange(rows)
    for wanted in range(3):
        counts = np.stack([(classes == c).sum(axis=1) for c in range(3)], axis=1)
        missing = counts[:, wanted] == 0
        if missing.any():
            # take a token from a class that has two or more (one exists: V >= 3 tokens, <= 2 classes)
            donor = counts[index[:, None], classes] >= 2
            token = donor[missing].argmax(axis=1)
            classes[index[missing], token] = wanted
    return classes


def _masked(w: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return normalise_rows(np.where(mask, w, 0.0))


def pair_rows(draw: st.DrawFn, rows: int, vocab: int, kind: str, precision: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(P [R, V], Q [R, V])`` of pair ``kind``, rounded to ``precision`` (float64 tensors)."""
    if kind == "near-equal":
        kind = draw(st.sampled_from(NEAR_EQUAL_KINDS))
    if kind == "one-ulp":
        # one ulp *of the precision the case is passed in*, up or down, zeros left at zero
        dtype = getattr(torch, precision)
        p = round_to(torch.from_numpy(normalise_rows(_smooth(draw, rows, vocab))), precision).to(dtype)
        up = torch.from_numpy(draw_bytes(draw, (rows, vocab)) & 1 == 0)
        toward = torch.where(up, torch.ones_like(p), torch.zeros_like(p))
        q = torch.where(p > 0, torch.nextafter(p, toward), p)
        return p.to(torch.float64), q.to(torch.float64)
    p_array, q_array = _pair_float64(draw, rows, vocab, kind)
    p, q = torch.from_numpy(p_array), torch.from_numpy(q_array)
    if kind == "low-precision":  # smooth laws rounded as a normalised engine passes them
        p, q = round_normalised(p, precision), round_normalised(q, precision)
    elif precision != "float64":
        p, q = round_to(p, precision), round_to(q, precision)
    return p, q


def _pair_float64(draw: st.DrawFn, rows: int, vocab: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    if kind == "random":
        return _any(draw, rows, vocab), _any(draw, rows, vocab)
    if kind == "equal":
        p = _any(draw, rows, vocab)
        return p, p.copy()
    if kind == "within-1e-6":
        # each entry moved by a factor within 1 +- 1e-6, renormalised: |q - p| <= 1e-6 p
        p = normalise_rows(_smooth(draw, rows, vocab))
        sign = draw_bytes(draw, (rows, vocab)).astype(np.int64) % 3 - 1  # -1, 0, +1 (0 when shrunk)
        return p, normalise_rows(p * (1.0 + 4e-7 * sign))
    if kind == "zero-residual":
        p = normalise_rows(_smooth(draw, rows, vocab))
        return p, p * draw(st.sampled_from(_ZERO_RESIDUAL_SCALES))
    if kind == "low-precision":
        return normalise_rows(_smooth(draw, rows, vocab)), normalise_rows(_smooth(draw, rows, vocab))
    if kind == "disjoint" or (kind == "crossed-supports" and vocab < 3):
        in_target = _support_mask(draw, rows, vocab)
        return _masked(_smooth(draw, rows, vocab), in_target), _masked(_smooth(draw, rows, vocab), ~in_target)
    if kind == "zeros":
        return (
            draw(_probability_rows(rows, vocab, "sparse", "float64")).numpy(),
            draw(_probability_rows(rows, vocab, "sparse", "float64")).numpy(),
        )
    if kind == "one-hot":
        return draw(_probability_rows(rows, vocab, "one-hot", "float64")).numpy(), _any(draw, rows, vocab)
    if kind == "draft-wider":
        inner = _support_mask(draw, rows, vocab)
        return _masked(_smooth(draw, rows, vocab), inner), normalise_rows(_smooth(draw, rows, vocab))
    if kind == "draft-narrower":
        inner = _support_mask(draw, rows, vocab)
        return normalise_rows(_smooth(draw, rows, vocab)), _masked(_smooth(draw, rows, vocab), inner)
    if kind == "crossed-supports":
        classes = _token_classes(draw, rows, vocab)
        return _masked(_smooth(draw, rows, vocab), classes != 2), _masked(_smooth(draw, rows, vocab), classes != 1)
    if kind == "overconfident":
        p = _any(draw, rows, vocab)
        power = np.asarray(_SHARPENING)[draw_bytes(draw, (rows, 1)) % len(_SHARPENING)]
        return p, normalise_rows(p**power)
    if kind == "flat-draft":
        return _any(draw, rows, vocab), normalise_rows(256.0 + draw_bytes(draw, (rows, vocab)) % 8)
    if kind == "sub-ulp":
        # Rejecting a drafted tail token leaves a residual of mass below one float32 ulp of 1, on
        # the dominant token: a kernel without a zero-mass guard divides 0 by 0 there.
        top = draw_bytes(draw, (rows, 1)).astype(np.int64)[:, 0] % vocab
        tail = np.asarray(_SUB_ULP_TAILS)[draw_bytes(draw, (rows, 1)).astype(np.int64) % len(_SUB_ULP_TAILS)]
        p = np.broadcast_to(tail, (rows, vocab)).copy()
        q = 2.0 * p
        index = np.arange(rows)
        p[index, top] = 1.0 - tail[:, 0] * (vocab - 1)
        q[index, top] = 1.0 - 2.0 * tail[:, 0] * (vocab - 1)
        return p, q
    raise ValueError(f"unknown pair kind {kind!r}; choose one of {', '.join(PAIR_KINDS)}")


def target_draft_pairs(
    vocab_size: int | None = None, kind: str = "random", precision: str = "float64", *, max_vocab: int = 8
) -> st.SearchStrategy[tuple[torch.Tensor, torch.Tensor]]:
    """``(p, q)``: a target and a draft probability vector at one position, related as ``kind`` says.

    ``kind`` is one of :data:`PAIR_KINDS`; both vectors are rounded to ``precision`` (not
    renormalised).  ``q`` always has a token of positive probability.
    """
    if kind not in PAIR_KINDS:
        raise ValueError(f"unknown pair kind {kind!r}; choose one of {', '.join(PAIR_KINDS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    sizes = vocab_sizes(2, max_vocab) if vocab_size is None else vocab_sizes(vocab_size, vocab_size)
    return _target_draft_pair(sizes, kind, precision)


@st.composite
def _target_draft_pair(
    draw: st.DrawFn, sizes: st.SearchStrategy[int], kind: str, precision: str
) -> tuple[torch.Tensor, torch.Tensor]:
    p, q = pair_rows(draw, 1, draw(sizes), kind, precision)
    return p[0], q[0]
