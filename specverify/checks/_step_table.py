"""Every draft sequence's step inputs, laid out once for a model whose laws are rows of a table.

A table or chain model gives each draft sequence the same step inputs in any batch, so where there
are few sequences (``V**K <= STEP_TABLE_SEQUENCES``) a model tally draws a chunk's drafts whole,
one uniform a row by the alias method (not ``K`` inverse-CDF draws), gathers their inputs from the
table in the sampler's dtype (not ``K + 1`` model look-ups and a cast), and completes what the
sampler emitted as counts (:meth:`StepTable.complete`, not row by row).  A table is built once per
model and process: units of one model that reach a worker one by one, each unpickled afresh, find
it by the model's content (:func:`step_table`).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
from typing import Any

import numpy as np
import torch

from .._laws.exact import all_sequences, sequence_offsets
from .._laws.models import ChainModel, TableModel, step_inputs
from .._layout import StepInputs

__all__ = ["STEP_TABLE_SEQUENCES", "StepTable", "step_table"]

#: Most draft sequences (V**K) whose step inputs a model tally lays out once, in a table.
STEP_TABLE_SEQUENCES = 4_096

#: Tables kept per process (the models of one check's shapes, and a few more).
_KEPT = 32


@dataclasses.dataclass(frozen=True, eq=False)
class StepTable:
    """The ``V**K`` draft sequences (base-V order), their step inputs and the draft's joint law."""

    sequences: torch.Tensor  # [V**K, K]
    target: torch.Tensor  # [V**K, K+1, V], the model's dtype
    draft: torch.Tensor  # [V**K, K, V]
    positive: torch.Tensor  # the sequences of positive joint draft mass (each position's row normalised)
    accept: torch.Tensor  # float64 [len(positive)]: the alias table's own share of each column ...
    alias: torch.Tensor  # int64 [len(positive)]: ... and the column's other sequence (an index into positive)
    completions: tuple[np.ndarray, ...]  # [V**i, V] float64, i = 1..K: the target's next-token law after each prefix
    _cast: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=dict)

    def draw(self, rows: int, generator: torch.Generator) -> torch.Tensor:
        """``rows`` sequence indices from the joint draft law, one float64 uniform each (its high
        bits pick a column of the alias table, the rest decide between the column's two
        sequences); never a sequence of draft mass 0 (only positive-mass sequences have columns)."""
        columns = self.positive.shape[0]
        x = torch.rand(rows, generator=generator, dtype=torch.float64) * columns
        column = x.long().clamp_(max=columns - 1)
        pick = torch.where(x - column < self.accept[column], column, self.alias[column])
        return self.positive[pick]

    def inputs(self, code: torch.Tensor, dtype: torch.dtype) -> StepInputs:
        """The step inputs of sequences ``code``, the probabilities in ``dtype``: the values the
        sampler would be given (cast as a call casts them)."""
        if dtype not in self._cast:
            self._cast[dtype] = (self.target.to(dtype), self.draft.to(dtype))
        target, draft = self._cast[dtype]
        return StepInputs(
            target.index_select(0, code), draft.index_select(0, code), self.sequences.index_select(0, code)
        )

    def complete(self, emitted: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Counts of completed ``K + 1`` sequences (base-V index) from counts of emitted ones
        (:func:`~specverify._laws.exact.sequence_index` order): the rows that emitted a prefix are
        extended by the target a token at a time, as one multinomial split of their count over
        the next token.  The law of completing each row on its own, at a cost in prefixes, not
        rows."""
        k, vocab = self.sequences.shape[1], self.target.shape[-1]
        offsets = sequence_offsets(vocab, k)
        counts = emitted[offsets[0] : offsets[1]]
        for length, law in enumerate(self.completions, start=1):  # over prefix lengths (<= K), vectorised over prefixes
            counts = rng.multinomial(counts, law).reshape(-1) + emitted[offsets[length] : offsets[length + 1]]
        return counts


_tables: collections.OrderedDict[tuple[bytes, int], StepTable] = collections.OrderedDict()
_lock = threading.Lock()


def step_table(model: Any, k: int) -> StepTable | None:
    """The model's table for steps of ``K`` drafts, or ``None`` where it has none (a model of
    another family, ``K = 0``, more than :data:`STEP_TABLE_SEQUENCES` sequences)."""
    if not isinstance(model, (TableModel, ChainModel)) or k == 0 or model.vocab_size**k > STEP_TABLE_SEQUENCES:
        return None
    key = (_content(model), k)
    with _lock:
        table = _tables.get(key)
        if table is not None:
            _tables.move_to_end(key)
            return table
    table = _built(model, k)
    with _lock:
        _tables[key] = table
        while len(_tables) > _KEPT:
            _tables.popitem(last=False)
    return table


def _content(model: TableModel | ChainModel) -> bytes:
    """A digest of everything the model's laws are made of."""
    digest = hashlib.blake2b(type(model).__name__.encode(), digest_size=32)
    tensors = (
        (*model.target_tables, *model.draft_tables)
        if isinstance(model, TableModel)
        else (model.target_table, model.draft_table)
    )
    for tensor in tensors:
        digest.update(f"{tensor.dtype}{tuple(tensor.shape)};".encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    if isinstance(model, ChainModel):
        digest.update(repr(model.context).encode())
    return digest.digest()


def _built(model: TableModel | ChainModel, k: int) -> StepTable:
    vocab = model.vocab_size
    sequences = all_sequences(vocab, k)
    target, draft = step_inputs(model, sequences)
    law = draft.double() / draft.double().sum(-1, keepdim=True)
    joint = law.gather(-1, sequences.unsqueeze(-1)).squeeze(-1).prod(-1)
    positive = (joint > 0).nonzero().squeeze(-1)
    accept, alias = _alias_table(joint[positive].numpy())
    completions = []
    for length in range(1, k + 1):  # the first sequence of each length-``length`` prefix, in base-V order
        rows = target[:: vocab ** (k - length), length].double()
        total = rows.sum(-1, keepdim=True)
        # a prefix of target mass 0 is never emitted (the audit stops it): its law is never drawn from
        completions.append(
            torch.where(total > 0, rows / total.clamp_min(torch.finfo(torch.float64).tiny), 1.0 / vocab).numpy()
        )
    return StepTable(
        sequences, target, draft, positive, torch.from_numpy(accept), torch.from_numpy(alias), tuple(completions)
    )


def _alias_table(mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias table for ``mass`` (positive, any total), by Vose's construction: column
    ``i`` keeps ``i`` with probability ``accept[i]`` and gives the rest to ``alias[i]``, so that
    a uniform column and a uniform share draw ``i`` with probability ``mass[i] / mass.sum()``."""
    n = mass.shape[0]
    scaled = (mass * (n / mass.sum())).tolist()
    accept, alias = [1.0] * n, list(range(n))
    small = [i for i, w in enumerate(scaled) if w < 1.0]
    large = [i for i, w in enumerate(scaled) if w >= 1.0]
    while small and large:  # once per column (n <= STEP_TABLE_SEQUENCES), when the table is built
        s, g = small.pop(), large[-1]
        accept[s], alias[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        if scaled[g] < 1.0:
            small.append(large.pop())
    # what is left over holds its whole column (a rounding's worth from 1)
    return np.asarray(accept, dtype=np.float64), np.asarray(alias, dtype=np.int64)
