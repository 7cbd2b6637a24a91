"""Row groups of history-dependent parameters as :class:`~specverify._warps.rules.SamplingParams` columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .._warps.rules import HISTORY_PARAMETERS

__all__ = ["HISTORY_OFF", "history_columns"]

#: Each scalar history parameter's value when off (``logit_bias`` off is a row of zeros).
HISTORY_OFF: dict[str, Any] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "penalty_window": -1,
    "min_tokens": 0,
    "stop_tokens": 0,
}
_INTEGER = {"penalty_window", "min_tokens", "stop_tokens"}


def history_columns(
    groups: Sequence[Mapping[str, Any]], which: torch.Tensor, names: Sequence[str]
) -> dict[str, torch.Tensor]:
    """The history parameters some group sets and the loop declares, one value per row
    (row ``r`` takes ``groups[which[r]]``'s, the others off): none set, no column, so a loop's
    memoryless checks give it exactly what they gave before."""
    columns = {}
    for name in HISTORY_PARAMETERS:
        if name not in names or not any(name in g for g in groups):
            continue
        if name == "logit_bias":
            vocab = next(len(g[name]) for g in groups if name in g)
            values = torch.tensor([list(g.get(name, [0.0] * vocab)) for g in groups], dtype=torch.float64)
        else:
            dtype = torch.int64 if name in _INTEGER else torch.float64
            values = torch.tensor([g.get(name, HISTORY_OFF[name]) for g in groups], dtype=dtype)
        columns[name] = values[which]
    return columns
