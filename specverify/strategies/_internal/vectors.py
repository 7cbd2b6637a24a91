"""Probability vectors: the building block of every generated case.

A whole ``[rows, V]`` matrix of weights comes from *one* Hypothesis draw of bytes, mapped to
weights by vectorised numpy.  That keeps generation fast (a table of a thousand rows is a handful
of draws, not thousands) and keeps shrinking meaningful: Hypothesis shrinks bytes toward zero, and
every mapping below sends zero bytes to the simplest vector of its kind (uniform, or one-hot on
token 0), so a failure shrinks to simple numbers.

Weights are small integers (a byte each), so the probabilities of a minimal example are ratios a
person can read.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from hypothesis import strategies as st

from ..._seeds import derive_seed

__all__ = [
    "LOW_PRECISIONS",
    "MAX_DRAWN_BYTES",
    "PRECISIONS",
    "VECTOR_KINDS",
    "draw_bytes",
    "draw_positions",
    "normalise_rows",
    "probability_rows",
    "probability_vectors",
    "round_normalised",
    "round_to",
    "vocab_sizes",
    "weights",
]

#: Kinds of probability vector.  ``sparse`` has exact zeros (at least one, and at least one
#: positive entry); ``dyadic`` entries are ``n / 2**m``, so the vector sums to exactly 1.
VECTOR_KINDS = ("smooth", "peaked", "uniform", "one-hot", "sparse", "dyadic")

#: Precisions a vector can be rounded to, finest first.
PRECISIONS = ("float64", "float32", "bfloat16", "float16")

#: The precisions engines pass probabilities in; bf16 first, so it is what a failure shrinks to.
LOW_PRECISIONS = ("bfloat16", "float16", "float32")

#: One draw of bytes never exceeds this; larger matrices are spread from it (see :func:`draw_bytes`).
#: Hypothesis caps a whole example at 8 KiB of choices, and a batch makes several such draws.
MAX_DRAWN_BYTES = 512

#: How much of a ``peaked`` vector its peak holds, at least: ``64 V / (64 V + 8 (V - 1))``.
PEAK_WEIGHT_PER_TOKEN = 64


def round_to(vector: torch.Tensor, precision: str) -> torch.Tensor:
    """Round to a lower precision *without* renormalising, as engines pass them (kept in float64)."""
    return vector.to(getattr(torch, precision)).to(torch.float64)


def round_normalised(rows: torch.Tensor, precision: str) -> torch.Tensor:
    """Round each row to ``precision`` with its sum as close to 1 as that precision allows.

    Entry by entry to the nearest value, then, a pass at a time over every row at once, the
    positive entry whose one-ulp step best closes the gap to 1 takes it (each entry one step at
    most, so every entry stays within an ulp of the exact value; zeros stay zero).  A row of nearest values can miss 1
    by ``V`` half-ulps (0.4% in bf16); these miss it by about the smallest entry's ulp: the rows a normalised engine
    passes, on which a kernel that does not renormalise is exact to that precision (kept in float64).
    """
    if precision == "float64":
        return rows
    dtype = getattr(torch, precision)
    values = rows.to(dtype)
    moved = torch.zeros_like(values, dtype=torch.bool)  # each entry moves one ulp at most
    for _ in range(rows.shape[-1]):  # over passes, vectorised over rows
        current = values.to(torch.float64)
        gap = 1.0 - current.sum(-1, keepdim=True)
        toward = torch.where(gap > 0, torch.ones_like(values), torch.zeros_like(values))
        stepped = torch.nextafter(values, toward)
        step = stepped.to(torch.float64) - current
        allowed = ~moved & (values > 0) & (stepped > 0) & ((gap - step).abs() < gap.abs())
        if not allowed.any():
            break
        best = torch.where(allowed, step.abs(), torch.full_like(step, -1.0)).argmax(-1, keepdim=True)
        take = allowed.gather(-1, best)
        values = values.scatter(-1, best, torch.where(take, stepped.gather(-1, best), values.gather(-1, best)))
        moved = moved.scatter(-1, best, take | moved.gather(-1, best))
    return values.to(torch.float64)


def vocab_sizes(min_vocab: int = 2, max_vocab: int = 8) -> st.SearchStrategy[int]:
    """Vocabulary sizes; shrinks toward ``min_vocab`` (2 tokens is the smallest real choice)."""
    if min_vocab < 2 or max_vocab < min_vocab:
        raise ValueError(f"need 2 <= min_vocab <= max_vocab, got {min_vocab}, {max_vocab}")
    return st.integers(min_vocab, max_vocab)


@functools.lru_cache(maxsize=128)
def _spread(total: int, drawn: int) -> np.ndarray:
    """A fixed map from ``total`` cells to ``drawn`` bytes: the first cells 1:1, the rest scattered."""
    rng = np.random.default_rng(derive_seed("specverify.strategies.spread", total, drawn))
    index = np.concatenate([np.arange(drawn), rng.integers(0, drawn, total - drawn)])
    index.flags.writeable = False
    return index


@functools.lru_cache(maxsize=MAX_DRAWN_BYTES + 1)
def _binary(size: int) -> st.SearchStrategy[bytes]:
    # Longer strings are allowed and only their last ``size`` bytes read: when the shrinker lowers
    # V or K, the string drawn for the larger case still fits this draw and is reused, instead of
    # being replaced by zeros (which would make every law uniform and lose the failure).
    return st.binary(min_size=size, max_size=MAX_DRAWN_BYTES)


def draw_bytes(draw: st.DrawFn, shape: tuple[int, ...]) -> np.ndarray:
    """``uint8`` array of ``shape`` from one draw of at most :data:`MAX_DRAWN_BYTES` bytes.

    Past that size the drawn bytes are spread over the cells by a fixed map (no randomness of its
    own), so an all-zero draw still gives an all-zero array and shrinking still simplifies it.
    Row-major cells of a step are positions in order, of a table prefixes shortest first: what
    is read first is what a failure shrinks onto.
    """
    total = math.prod(shape)
    if total == 0:
        return np.zeros(shape, dtype=np.uint8)
    size = min(total, MAX_DRAWN_BYTES)
    # Cells are read from the *end* of the string backwards.  Hypothesis shrinks a string toward
    # zeros at its front, so the detail that remains sits at the first cells (position 0, the
    # root of a table), and a shorter case (lower K or V) keeps exactly those cells.
    raw = np.frombuffer(draw(_binary(size)), dtype=np.uint8)[::-1][:size]
    if size < total:
        raw = raw[_spread(total, size)]
    return raw.reshape(shape)


def draw_positions(draw: st.DrawFn, rows: int, vocab: int) -> np.ndarray:
    """One token per row (shrinks toward token 0)."""
    if vocab <= 256:
        return draw_bytes(draw, (rows,)).astype(np.int64) % vocab
    pairs = draw_bytes(draw, (rows, 2)).astype(np.int64)
    return (pairs[:, 0] * 256 + pairs[:, 1]) % vocab


def weights(kind: str, raw: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Unnormalised float64 weights ``[R, V]`` of one kind, from bytes ``raw [R, V]``.

    ``position [R]`` places the peak of ``peaked`` and the one of ``one-hot``; all-zero inputs give
    the simplest vector of the kind.
    """
    rows, vocab = raw.shape
    index = np.arange(rows)
    if kind == "smooth":
        return raw + 1.0
    if kind == "uniform":
        return np.ones((rows, vocab))
    if kind == "one-hot":
        w = np.zeros((rows, vocab))
        w[index, position] = 1.0
        return w
    if kind == "peaked":
        w = (raw % 8) + 1.0
        w[index, position] += PEAK_WEIGHT_PER_TOKEN * vocab
        return w
    if kind == "sparse":
        w = np.where(raw < 96, 0.0, raw - 95.0)
        empty = ~(w > 0).any(axis=1)
        w[index[empty], position[empty]] = 1.0
        full = (w > 0).all(axis=1)
        w[index[full], w[full].argmin(axis=1)] = 0.0
        return w
    if kind == "dyadic":
        # numerators 1..256, the largest topped up so that they sum to a power of two
        w = raw + 1.0
        total = w.sum(axis=1)
        power = np.exp2(np.ceil(np.log2(total)))
        w[index, w.argmax(axis=1)] += power - total
        return w
    raise ValueError(f"unknown vector kind {kind!r}; choose one of {', '.join(VECTOR_KINDS)}")


def normalise_rows(w: np.ndarray) -> np.ndarray:
    return w / w.sum(axis=1, keepdims=True)


def _check_vector_args(vocab_size: int | None, kind: str | None, precision: str) -> None:
    if vocab_size is not None and vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
    if kind is not None and kind not in VECTOR_KINDS:
        raise ValueError(f"unknown vector kind {kind!r}; choose one of {', '.join(VECTOR_KINDS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")


def probability_rows(
    rows: int, vocab_size: int, kind: str | None = None, precision: str = "float64"
) -> st.SearchStrategy[torch.Tensor]:
    """``[rows, vocab_size]`` float64 matrix whose rows are probability vectors of ``kind``.

    With ``kind=None`` each row draws its own kind (shrinking toward ``smooth``).  Rows are rounded
    to ``precision`` and not renormalised, as an engine passes them.
    """
    _check_vector_args(vocab_size, kind, precision)
    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    return _probability_rows(rows, vocab_size, kind, precision)


@st.composite
def _probability_rows(draw: st.DrawFn, rows: int, vocab: int, kind: str | None, precision: str) -> torch.Tensor:
    if kind is None:
        kinds = draw_bytes(draw, (rows,)) % len(VECTOR_KINDS)
        present = [VECTOR_KINDS[i] for i in np.unique(kinds)]
    else:
        kinds = np.zeros(rows, dtype=np.uint8)
        present = [kind]
    needs_bytes = any(k not in ("uniform", "one-hot") for k in present)
    raw = draw_bytes(draw, (rows, vocab)) if needs_bytes else np.zeros((rows, vocab), dtype=np.uint8)
    needs_position = any(k in ("peaked", "one-hot", "sparse") for k in present)
    position = draw_positions(draw, rows, vocab) if needs_position else np.zeros(rows, dtype=np.int64)
    if kind is not None:
        w = weights(kind, raw, position)
    else:
        w = np.empty((rows, vocab))
        for code in np.unique(kinds):
            mask = kinds == code
            w[mask] = weights(VECTOR_KINDS[code], raw[mask], position[mask])
    matrix = torch.from_numpy(normalise_rows(w))
    return matrix if precision == "float64" else round_to(matrix, precision)


def probability_vectors(
    vocab_size: int | None = None, kind: str | None = None, precision: str = "float64", *, max_vocab: int = 8
) -> st.SearchStrategy[torch.Tensor]:
    """A probability vector over ``vocab_size`` tokens (drawn up to ``max_vocab`` when ``None``).

    ``kind`` is one of :data:`VECTOR_KINDS` (drawn when ``None``); ``precision`` one of
    :data:`PRECISIONS`: the vector is rounded to it and *not* renormalised, so a low-precision
    vector sums to 1 only within its precision, exactly as engines pass probabilities.
    """
    _check_vector_args(vocab_size, kind, precision)
    sizes = vocab_sizes(2, max_vocab) if vocab_size is None else st.just(vocab_size)
    return _probability_vector(sizes, kind, precision)


@st.composite
def _probability_vector(
    draw: st.DrawFn, sizes: st.SearchStrategy[int], kind: str | None, precision: str
) -> torch.Tensor:
    return draw(_probability_rows(1, draw(sizes), kind, precision))[0]
