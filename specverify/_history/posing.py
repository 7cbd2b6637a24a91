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


def _bad_words(given: Sequence[Any]) -> torch.Tensor:
    """``[G, W, M]``: each group's banned sequences, left-padded with ``-1`` to the longest (none: ``-1``)."""
    count = max(1, *(len(words or ()) for words in given))
    width = max(1, *(len(word) for words in given for word in words or ()))
    rows = [
        [[-1] * (width - len(word)) + list(word) for word in words or ()] + [[-1] * width] * (count - len(words or ()))
        for words in given
    ]
    return torch.tensor(rows, dtype=torch.int64)


def _grammars(given: Sequence[Any]) -> torch.Tensor:
    """``[G, S, V]``: each group's transition table, padded with unreachable states that allow every
    token (off: one such state)."""
    vocab = next(len(table[0]) for table in given if table is not None)
    states = max(len(table) for table in given if table is not None)
    free = [0] * vocab
    return torch.tensor(
        [[*(table or [free]), *[free] * (states - len(table or [free]))] for table in given], dtype=torch.int64
    )


#: The parameters posed as a table per group, built by these.
_TABLES = {"bad_words": _bad_words, "grammar": _grammars}


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
        if name in _TABLES:
            values = _TABLES[name]([g.get(name) for g in groups])
        elif name == "logit_bias":
            vocab = next(len(g[name]) for g in groups if name in g)
            values = torch.tensor([list(g.get(name, [0.0] * vocab)) for g in groups], dtype=torch.float64)
        else:
            dtype = torch.int64 if name in _INTEGER else torch.float64
            values = torch.tensor([g.get(name, HISTORY_OFF[name]) for g in groups], dtype=dtype)
        columns[name] = values[which]
    return columns
