"""Logits and parameters where two engines' warps differ: the cases that tell conventions apart.

Each example is drawn for a pair of presets (:data:`specverify._warps.presets.PRESETS`) and a kind of
difference that separates that pair: ties at the ``k``-th logit, mass exactly at the ``top_p``
boundary (uniform blocks of 2, 4 or 8 tokens, whose masses are exact in binary), temperature with
``top_p`` or ``min_p`` (cut before or after the temperature), ``min_p`` with ``top_p`` (which cut
comes first), ``top_p`` after ``top_k`` (renormalised mass or the whole mass).  The parameter is
then chosen among a grid where the pair's laws differ, so every example separates its pair.
"""

from __future__ import annotations

import torch
from hypothesis import assume
from hypothesis import strategies as st

from ..._warps.presets import PRESETS
from ..._warps.rules import SamplingParams

__all__ = ["SEPARATING_KINDS", "separating_logits_cases"]

#: Each kind of difference and the parameters it sets.
SEPARATING_KINDS: dict[str, tuple[str, ...]] = {
    "ties at the k-th logit": ("top_k",),
    "mass at the top-p boundary": ("top_p",),
    "temperature with top-p": ("temperature", "top_p"),
    "min-p with top-k and temperature": ("temperature", "top_k", "min_p"),
    "min-p with top-p": ("top_p", "min_p"),
    "top-p after top-k": ("top_k", "top_p"),
}
_GRID = {
    "temperature": (0.5, 0.7, 1.5, 2.0),
    "top_p": tuple(i / 16 for i in range(1, 16)),
    "min_p": tuple(i / 20 for i in range(1, 20)),
}


def _separates(first: str, second: str) -> list[str]:
    """The kinds that can tell ``first`` from ``second`` (their rules differ there)."""
    a, b = PRESETS[first], PRESETS[second]
    kinds = []
    if a.top_k_exact != b.top_k_exact:
        kinds.append("ties at the k-th logit")
    if a.top_p_inclusive != b.top_p_inclusive:
        kinds.append("mass at the top-p boundary")
    if a.temperature_last != b.temperature_last:
        kinds += ["temperature with top-p", "min-p with top-k and temperature"]
    min_p_first = [p.order.index("min_p") < p.order.index("top_p") for p in (a, b)]
    if a.joint != b.joint or min_p_first[0] != min_p_first[1]:
        kinds.append("min-p with top-p")
    if a.joint != b.joint:
        kinds.append("top-p after top-k")
    return kinds


@st.composite
def separating_logits_cases(draw: st.DrawFn, max_vocab: int = 8) -> tuple[torch.Tensor, SamplingParams, str, str]:
    """``(logits [1, V] float64, params, first, second)``: one row where the presets ``first`` and
    ``second`` give different laws."""
    first, second = draw(st.permutations(list(PRESETS)).map(lambda names: tuple(names[:2])))
    kinds = _separates(first, second)
    assume(kinds)
    kind = draw(st.sampled_from(kinds))
    vocab = draw(st.integers(4, max_vocab))
    if kind == "mass at the top-p boundary":
        block = draw(st.sampled_from([b for b in (2, 4, 8) if b <= vocab]))
        logits = [0.0] * block + [-torch.inf] * (vocab - block)
    elif kind == "ties at the k-th logit":
        tied = draw(st.integers(2, vocab - 1))
        above = draw(st.integers(0, vocab - tied))
        logits = [2.0 + i for i in range(above)][::-1] + [1.0] * tied + [-1.0 - i for i in range(vocab - tied - above)]
    else:
        logits = [0.25 * v for v in draw(st.lists(st.integers(-16, 16), min_size=vocab, max_size=vocab, unique=True))]
    names = SEPARATING_KINDS[kind]
    grids = [(tuple(range(1, vocab)) if name == "top_k" else _GRID[name]) for name in names]
    combos = torch.cartesian_prod(*[torch.tensor(g, dtype=torch.float64) for g in grids]).reshape(-1, len(names))
    params = SamplingParams(
        **{name: combos[:, i].to(torch.int64) if name == "top_k" else combos[:, i] for i, name in enumerate(names)}
    )
    rows = torch.tensor([logits], dtype=torch.float64).expand(combos.shape[0], -1)
    apart = (PRESETS[first](rows, params) - PRESETS[second](rows, params)).abs().sum(-1) > 1e-6
    found = apart.nonzero().flatten().tolist()
    assume(found)
    row = draw(st.sampled_from(found))
    return rows[row : row + 1].clone(), params.select(slice(row, row + 1)), first, second
