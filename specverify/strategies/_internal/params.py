"""Per-row sampling parameters, and logits to warp with them: the inputs of a logits-level step.

Every row draws each parameter either at one of its edges (where engines' warps break: a
temperature near 0 or large, ``top_k`` 1 or at least the vocabulary, a tiny ``top_p``, ``min_p``
near 1, and each one off) or from its ordinary range, so one batch holds heterogeneous rows, as
engines batch them.  Logits have no exact ties within a position (the cuts' tie rules are where
engines differ; :mod:`specverify._warps.rules` states its own).  Everything shrinks toward the parameter
being off and toward small vocabularies.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from ..._warps.rules import DEFAULT_ORDER, SamplingParams

__all__ = ["PARAM_EDGES", "logits_cases", "sampling_params"]

#: The edge values each parameter draws among (``top_k`` also draws 1, V - 1, V and 2V).
PARAM_EDGES: dict[str, tuple[float, ...]] = {
    "temperature": (1.0, 0.0, 1e-3, 0.05, 5.0, 100.0),
    "top_k": (0, 1),
    "top_p": (1.0, 1e-9, 1e-3, 0.999),
    "min_p": (0.0, 0.999, 1.0, 1e-6),
}
_RANGES = {"temperature": (0.1, 3.0), "top_p": (0.05, 1.0), "min_p": (0.0, 0.5)}


@st.composite
def _value(draw: st.DrawFn, name: str, vocab: int) -> float | int:
    if name == "top_k":
        edges = (0, 1, max(vocab - 1, 1), vocab, 2 * vocab)
        return draw(st.sampled_from(edges) | st.integers(1, vocab))
    low, high = _RANGES[name]
    return draw(st.sampled_from(PARAM_EDGES[name]) | st.floats(low, high))


@st.composite
def sampling_params(draw: st.DrawFn, rows: int, vocab: int, names: tuple[str, ...] = DEFAULT_ORDER) -> SamplingParams:
    """:class:`~specverify.SamplingParams` of ``rows`` heterogeneous rows for a vocabulary of
    ``vocab`` tokens; only ``names`` are set (a subset of :data:`~specverify._warps.rules.DEFAULT_ORDER`)."""
    unknown = set(names) - set(DEFAULT_ORDER)
    if unknown:
        raise ValueError(f"sampling_params draws the warps {DEFAULT_ORDER}, not {sorted(unknown)}")
    columns = {}
    for name in names:
        values = draw(st.lists(_value(name, vocab), min_size=rows, max_size=rows))
        columns[name] = torch.tensor(values, dtype=torch.int64 if name == "top_k" else torch.float64)
    return SamplingParams(**columns)


@st.composite
def logits_cases(
    draw: st.DrawFn, max_rows: int = 4, max_k: int = 3, max_vocab: int = 8, names: tuple[str, ...] = DEFAULT_ORDER
) -> tuple[torch.Tensor, SamplingParams]:
    """``(target_logits [B, K+1, V] float64, params)``: per-row parameters from
    :func:`sampling_params`, and logits on a grid of quarter nats in ``[-8, 8]``, distinct within
    a position (so no tie survives any temperature's division)."""
    rows, k, vocab = draw(st.integers(1, max_rows)), draw(st.integers(1, max_k)), draw(st.integers(2, max_vocab))
    position = st.lists(st.integers(-32, 32), min_size=vocab, max_size=vocab, unique=True)
    grid = draw(st.lists(st.lists(position, min_size=k + 1, max_size=k + 1), min_size=rows, max_size=rows))
    logits = torch.tensor(grid, dtype=torch.float64) * 0.25
    return logits, draw(sampling_params(rows, vocab, names))
