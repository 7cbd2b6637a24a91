"""Target and draft models over a small vocabulary: the laws a verification step is run on.

A model answers one question, vectorised over a batch: *after these tokens of the current step,
what are the target's and the draft's next-token laws?*  The step's own context (the prompt) is part
of the model.  Row ``i`` of a step's ``target_probs`` is ``model.target(drafts[:, :i])``, which is how
the law at position 2 comes to depend on the drafts before it.

Two families cover what the checks need:

* :class:`TableModel`: an arbitrary law per prefix, one table per depth (``V**i`` rows at depth
  ``i``), for exhaustive small cases;
* :class:`ChainModel`: an order-``m`` Markov chain (the seed document's experiment is order 1),
  defined after any prefix, so it also drives whole token streams.

Tables may hold unnormalised rows (rounded inputs); the law of a row is the row over its sum.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

import torch

from .oracle import inverse_cdf

__all__ = ["ChainModel", "Model", "TableModel", "draw_drafts", "sample_next", "step_inputs"]


@runtime_checkable
class Model(Protocol):
    """Next-token laws of a target and a draft after a prefix of the current step."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def max_depth(self) -> int | None:
        """The longest prefix the model is defined after (``None``: any)."""
        ...

    def target(self, prefix: torch.Tensor) -> torch.Tensor:
        """``[B, V]`` target probabilities after ``prefix [B, i]`` (int64)."""
        ...

    def draft(self, prefix: torch.Tensor) -> torch.Tensor:
        """``[B, V]`` draft probabilities after ``prefix [B, i]`` (int64)."""
        ...


def _encode(prefix: torch.Tensor, vocab: int) -> torch.Tensor:
    """Base-``vocab`` index of each row of ``prefix`` (first token most significant)."""
    index = torch.zeros(prefix.shape[0], dtype=torch.int64, device=prefix.device)
    for column in range(prefix.shape[1]):  # loop over prefix length (<= K), never over rows
        index = index * vocab + prefix[:, column]
    return index


@dataclasses.dataclass(frozen=True, eq=False)
class TableModel:
    """An arbitrary law after every prefix up to depth ``K``.

    ``target[i]`` is ``[V**i, V]`` (rows indexed by the base-V code of the prefix), for
    ``i = 0..K``; ``draft[i]`` likewise for ``i = 0..K-1``.
    """

    target_tables: tuple[torch.Tensor, ...]
    draft_tables: tuple[torch.Tensor, ...]

    def __post_init__(self) -> None:
        vocab = self.target_tables[0].shape[-1]
        if len(self.draft_tables) != len(self.target_tables) - 1:
            raise ValueError("TableModel needs one more target table than draft tables")
        for depth, table in enumerate(self.target_tables):
            if tuple(table.shape) != (vocab**depth, vocab):
                raise ValueError(f"target table {depth} has shape {tuple(table.shape)}")
        for depth, table in enumerate(self.draft_tables):
            if tuple(table.shape) != (vocab**depth, vocab):
                raise ValueError(f"draft table {depth} has shape {tuple(table.shape)}")

    @property
    def vocab_size(self) -> int:
        return int(self.target_tables[0].shape[-1])

    @property
    def max_depth(self) -> int:
        return len(self.draft_tables)

    def target(self, prefix: torch.Tensor) -> torch.Tensor:
        return self.target_tables[prefix.shape[1]][_encode(prefix, self.vocab_size)]

    def draft(self, prefix: torch.Tensor) -> torch.Tensor:
        return self.draft_tables[prefix.shape[1]][_encode(prefix, self.vocab_size)]


@dataclasses.dataclass(frozen=True, eq=False)
class ChainModel:
    """An order-``m`` Markov chain: the law depends on the last ``m`` tokens of context + prefix.

    ``target_table`` and ``draft_table`` are ``[V**m, V]``; ``context`` holds at least ``m`` tokens.
    """

    target_table: torch.Tensor
    draft_table: torch.Tensor
    context: tuple[int, ...]

    def __post_init__(self) -> None:
        rows, vocab = self.target_table.shape
        if self.draft_table.shape != self.target_table.shape:
            raise ValueError("target and draft tables must have the same shape")
        if vocab**self.order != rows:
            raise ValueError(f"a [{rows}, {vocab}] table is not an order-m chain over {vocab} tokens")
        if len(self.context) < self.order:
            raise ValueError(f"an order-{self.order} chain needs at least {self.order} context tokens")

    @property
    def order(self) -> int:
        rows, vocab = self.target_table.shape
        order = 0
        while vocab**order < rows:
            order += 1
        return order

    @property
    def vocab_size(self) -> int:
        return int(self.target_table.shape[-1])

    @property
    def max_depth(self) -> None:
        return None

    def _rows(self, prefix: torch.Tensor) -> torch.Tensor:
        order = self.order
        if order == 0:
            return torch.zeros(prefix.shape[0], dtype=torch.int64, device=prefix.device)
        context = torch.tensor(self.context[-order:], dtype=torch.int64, device=prefix.device)
        history = torch.cat([context.expand(prefix.shape[0], -1), prefix], dim=1)
        return _encode(history[:, -order:], self.vocab_size)

    def target(self, prefix: torch.Tensor) -> torch.Tensor:
        return self.target_table[self._rows(prefix)]

    def draft(self, prefix: torch.Tensor) -> torch.Tensor:
        return self.draft_table[self._rows(prefix)]


def sample_next(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row from ``probs [B, V]`` (rows need not be normalised), by the inverse CDF of
    one float64 uniform a row: exact in law, never a zero-mass token, and about five times faster on
    a CPU than ``torch.multinomial`` at the harness's batch sizes (65,536 rows of 8 tokens)."""
    probs = probs.to(torch.float64)
    return inverse_cdf(
        probs, torch.rand(probs.shape[:-1], generator=generator, dtype=torch.float64, device=probs.device)
    )


def draw_drafts(
    model: Model, batch: int, k: int, generator: torch.Generator, *, probs: list[torch.Tensor] | None = None
) -> torch.Tensor:
    """``[batch, k]`` draft tokens sampled autoregressively from the draft model; with ``probs``,
    the draft law each was drawn from (``[batch, V]`` per position) is appended to it, so that
    :func:`step_inputs` need not look it up again."""
    drafts = torch.empty((batch, 0), dtype=torch.int64)
    for _ in range(k):  # loop over positions (<= K), vectorised over rows
        law = model.draft(drafts)
        if probs is not None:
            probs.append(law)
        drafts = torch.cat([drafts, sample_next(law, generator).unsqueeze(-1)], dim=1)
    return drafts


def step_inputs(
    model: Model, drafts: torch.Tensor, draft_probs: list[torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(target_probs [B, K+1, V], draft_probs [B, K, V])`` for a verification step on ``drafts``
    (``draft_probs``: the draft laws :func:`draw_drafts` drew them from, not looked up again)."""
    k = drafts.shape[1]
    target = torch.stack([model.target(drafts[:, :i]) for i in range(k + 1)], dim=1)
    if k == 0:
        draft = target[:, :0]
    else:
        draft = torch.stack(
            draft_probs if draft_probs is not None else [model.draft(drafts[:, :i]) for i in range(k)], dim=1
        )
    return target, draft
