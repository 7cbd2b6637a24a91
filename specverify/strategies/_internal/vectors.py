"""Probability vectors: the building block of every generated case.

Weights are small integers where that is enough, so failures shrink to simple numbers.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

__all__ = ["VECTOR_KINDS", "probability_vectors", "round_to"]

VECTOR_KINDS = ("smooth", "peaked", "uniform", "one-hot", "sparse", "dyadic")
PRECISIONS = ("float64", "float32", "bfloat16", "float16")


def round_to(vector: torch.Tensor, precision: str) -> torch.Tensor:
    """Round to a lower precision *without* renormalising, as engines pass them (kept in float64)."""
    return vector.to(getattr(torch, precision)).to(torch.float64)


@st.composite
def probability_vectors(draw, vocab_size: int, kind: str | None = None, precision: str = "float64") -> torch.Tensor:
    """A probability vector over ``vocab_size`` tokens of the given ``kind`` (drawn when ``None``)."""
    kind = kind or draw(st.sampled_from(VECTOR_KINDS))
    v = vocab_size
    if kind == "uniform":
        weights = [1] * v
    elif kind == "one-hot":
        weights = [0] * v
        weights[draw(st.integers(0, v - 1))] = 1
    elif kind == "dyadic":
        cuts = sorted(draw(st.lists(st.integers(0, 256), min_size=v - 1, max_size=v - 1)))
        edges = [0, *cuts, 256]
        weights = [b - a for a, b in zip(edges, edges[1:])]
    elif kind == "peaked":
        weights = draw(st.lists(st.integers(0, 8), min_size=v, max_size=v))
        weights[draw(st.integers(0, v - 1))] += 1000
    else:
        weights = draw(st.lists(st.integers(1 if kind == "smooth" else 0, 255), min_size=v, max_size=v))
    if sum(weights) == 0:
        weights[draw(st.integers(0, v - 1))] = 1
    vector = torch.tensor(weights, dtype=torch.float64)
    vector = vector / vector.sum()
    return round_to(vector, precision) if precision != "float64" else vector
