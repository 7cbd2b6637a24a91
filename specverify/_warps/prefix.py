"""A sorted cut (top-p, top-k, both) from a partial sort: the same tokens as a full stable sort.

A cut taken on the law sorted by decreasing probability (ties by increasing id) keeps a prefix of
that order: the nucleus of ``top_p`` and the ``k`` largest both are, and so is their intersection.
Where the prefix is short (a peaked law, a small ``top_p``), sorting all ``V`` values is waste: the
largest ``m`` values (``topk``) in decreasing order are the first ``m`` of the full sort's values,
whatever order ``topk`` gives ties in (equal values), so a rule that reads only the values before a
position (a running mass, a rank, the ``k``-th value) decides the same positions.  The kept ids are
then those above the last kept value, and of the ties at it the first by increasing id, as the
stable sort orders them.  Where a row's prefix may be long (a flat law: :func:`short_nucleus` says
so in two cheap passes), or ``m`` is a quarter of ``V`` or more, the full sort is taken at once, so
a cut costs at most a little more than the sort did.  On the CPU a running sum over a prefix is the
full running sum's first values (the cumulative sum is sequential), so the kept sets are the full
sort's bit for bit; ``tests/test_warp.py`` compares the two on random rows with ties.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["FIRST_PREFIX", "kept_prefix", "short_nucleus"]

#: The prefix length taken from a partial sort, in tokens: at most this many tokens have a probability of at least its
#: inverse, so a nucleus those tokens' mass reaches ends inside it.
FIRST_PREFIX = 64


def short_nucleus(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """``[..., 1]`` bool: rows whose ``top_p`` nucleus surely ends within the largest
    :data:`FIRST_PREFIX` tokens (the tokens of probability at least ``1 / FIRST_PREFIX`` hold more
    than ``top_p``); two passes over the row, far cheaper than a sort."""
    big = probs >= 1.0 / FIRST_PREFIX
    return (probs * big).sum(dim=-1, keepdim=True) > top_p + 1e-9


def kept_prefix(
    probs: torch.Tensor,
    keep_sorted: Callable[[torch.Tensor], torch.Tensor],
    *,
    at_least: int = 1,
    short: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[..., V]`` bool: the tokens a sorted cut keeps.

    Args:
        probs: probabilities ``[..., V]``.
        keep_sorted: the cut on the largest values in decreasing order ``[..., m]`` -> ``[..., m]``
            bool, a prefix of each row, reading at each position only the values up to it.
        at_least: the rule reads this many positions at least (a top-k's ``k``).
        short: ``[..., 1]`` rows whose prefix is known to end within :data:`FIRST_PREFIX` (``None``:
            try); where any row's is not, the full sort is taken at once (a flat law costs no more).
    """
    vocab = probs.shape[-1]
    m = max(FIRST_PREFIX, at_least)
    # elsewhere a cumulative sum's association may depend on its length; NaNs have no order by value
    if probs.device.type != "cpu" or 4 * m > vocab or bool(probs.isnan().any()):
        return _full(probs, keep_sorted)
    if short is not None and not bool(short.all()):
        return _full(probs, keep_sorted)
    values = probs.topk(m, dim=-1, sorted=True).values
    kept = keep_sorted(values)
    if bool(kept[..., -1].any()):  # some row's prefix reaches past m: it may end further on
        return _full(probs, keep_sorted)
    count = kept.sum(dim=-1, keepdim=True)  # the prefix's length: its last kept value, by position
    last = values.gather(-1, (count - 1).clamp_min(0))
    above = probs > last
    tied = probs == last
    room = count - above.sum(dim=-1, keepdim=True)
    return (above | (tied & (tied.cumsum(dim=-1) <= room))) & (count > 0)


def _full(probs: torch.Tensor, keep_sorted: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    order = torch.sort(-probs, dim=-1, stable=True).indices
    kept = keep_sorted(probs.gather(-1, order))
    return torch.zeros_like(kept).scatter_(-1, order, kept)
