"""Row groups of sampling parameters (memoryless and history-dependent) as
:class:`~specverify._warps.rules.SamplingParams`: what a loop is posed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .._warps.rules import HISTORY_PARAMETERS, SamplingParams

__all__ = ["HISTORY_OFF", "WARP_OFF", "history_columns", "posed_params"]

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
#: Each memoryless warp's value when off.
WARP_OFF: dict[str, Any] = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0}


def posed_params(groups: Sequence[Mapping[str, Any]], which: torch.Tensor, names: Sequence[str]) -> SamplingParams:
    """Row ``r``'s parameters from ``groups[which[r]]``, for the parameters a loop declares (``names``):
    a memoryless warp off where its group leaves it out, a history parameter only where a group sets it
    (:func:`history_columns`); per-request seeds are the caller's."""
    columns = history_columns(groups, which, names)
    for name in names:
        if name in WARP_OFF:
            dtype = torch.int64 if name == "top_k" else torch.float64
            columns[name] = torch.tensor([g.get(name, WARP_OFF[name]) for g in groups], dtype=dtype)[which]
    return SamplingParams(**columns)


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
