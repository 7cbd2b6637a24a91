"""The exact law of the canonical algorithm, by enumeration.

Two flavours of the same mathematics:

* vectorised float64 (torch), fast enough to give every statistical check its expected counts;
* generic scalar code over any number type with ``+ - * /`` and comparisons; fed
  :class:`fractions.Fraction` it computes laws with no rounding at all, which is how the tests *prove*
  losslessness on small models rather than estimate it.

Outcomes of one verification step, given the drafts, are pairs ``(j, t)``: ``j`` drafts accepted,
then token ``t`` (the replacement at position ``j``, or the bonus when ``j = K``).  The *emitted
sequence* is ``(y_1, ..., y_j, t)``; emitted sequences of every length are indexed by
:func:`sequence_index`.  Completing an emitted sequence to ``K + 1`` tokens with the target gives the
*completed* law, which for a lossless sampler is the target's own joint law, whatever the draft.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Protocol, TypeVar

import torch

from .models import ChainModel, Model, step_inputs
from .oracle import normalise, residual_distribution

__all__ = [
    "all_sequences",
    "chain_law_fns",
    "completed_law",
    "emitted_law",
    "emitted_law_scalar",
    "model_law_fns",
    "sequence_index",
    "sequence_of",
    "sequence_offsets",
    "step_law",
    "step_law_scalar",
    "stream_law_scalar",
    "target_law",
    "target_law_scalar",
]

N = TypeVar("N", bound="_Number")


class _Number(Protocol):
    """What the scalar code asks of a number type: arithmetic with itself and ints, and an order
    (:class:`fractions.Fraction` and ``float`` have both)."""

    def __add__(self: N, other: N | int, /) -> N: ...
    def __sub__(self: N, other: N | int, /) -> N: ...
    def __mul__(self: N, other: N | int, /) -> N: ...
    def __truediv__(self: N, other: N | int, /) -> N: ...
    def __lt__(self: N, other: N, /) -> bool: ...
    def __gt__(self: N, other: N, /) -> bool: ...
    def __ge__(self: N, other: N, /) -> bool: ...


#: One over float64's machine epsilon, an int: the residual's noise level is ``V / FLOAT64_EPS_INVERSE``
#: in every number type (exact in Fraction and in float alike).
FLOAT64_EPS_INVERSE = 2**52
LawFn = Callable[[tuple[int, ...]], Sequence[Any]]


# --- one step, given the drafts -------------------------------------------------------------


def step_law(target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor) -> torch.Tensor:
    """``[B, K+1, V]``: probability that a row accepts ``j`` drafts and then emits token ``t``."""
    batch, k = draft_tokens.shape
    p = normalise(target_probs)
    q = normalise(draft_probs)
    index = draft_tokens.unsqueeze(-1)
    ratio_num = p[:, :k].gather(-1, index).squeeze(-1)
    ratio_den = q.gather(-1, index).squeeze(-1)
    # min(1, p/q) with the sampler's own convention for q = 0 (accept iff p > 0).
    accept = torch.where(
        ratio_den > 0,
        (ratio_num / ratio_den.clamp_min(torch.finfo(torch.float64).tiny)).clamp(max=1.0),
        (ratio_num > 0).to(torch.float64),
    )
    reach = torch.cumprod(torch.cat([torch.ones_like(accept[:, :1]), accept], dim=1), dim=1)
    stop = reach * torch.cat([1.0 - accept, torch.ones_like(accept[:, :1])], dim=1)
    q_padded = torch.cat([q, q.new_zeros(batch, 1, q.shape[-1])], dim=1)
    dist = residual_distribution(p, q_padded)
    dist = dist / dist.sum(dim=-1, keepdim=True)
    return stop.unsqueeze(-1) * dist


def step_law_scalar(p: Sequence[Sequence[N]], q: Sequence[Sequence[N]], y: Sequence[int]) -> list[list[N]]:
    """One row of :func:`step_law` in any exact number type (``Fraction`` for proofs)."""
    k = len(y)
    p = [_normalised(row) for row in p]
    q = [_normalised(row) for row in q]
    zero, one = p[0][0] - p[0][0], p[0][0] - p[0][0] + 1
    law: list[list[N]] = []
    reach = one
    for j in range(k + 1):
        if j < k:
            pj, qj = p[j][y[j]], q[j][y[j]]
            accept = (one if pj >= qj else pj / qj) if qj > zero else (one if pj > zero else zero)
            residual = [max(a - b, zero) for a, b in zip(p[j], q[j])]
        else:
            accept, residual = zero, list(p[j])
        mass = sum(residual, zero)
        # the harness's convention (samplers/_reference.py): a residual of float-noise mass, at most
        # V units of float64 round-off, is a rounding artefact of p = q; the token is drawn from p
        noise = one * len(residual) / FLOAT64_EPS_INVERSE
        dist = [r / mass for r in residual] if mass > noise else list(p[j])
        law.append([reach * (one - accept) * d for d in dist])
        reach = reach * accept
    return law


def _normalised(row: Sequence[N]) -> list[N]:
    total = sum(row[1:], row[0])
    return [x / total for x in row]


# --- sequences ------------------------------------------------------------------------------


def sequence_offsets(vocab: int, k: int) -> list[int]:
    """Offset of each emitted length ``1..K+1`` in the flat index; the last entry is the size."""
    offsets = [0]
    for length in range(1, k + 2):
        offsets.append(offsets[-1] + vocab**length)
    return offsets


def sequence_index(tokens: torch.Tensor, num_accepted: torch.Tensor, vocab: int) -> torch.Tensor:
    """Flat index of each row's emitted sequence ``tokens[b, :num_accepted[b] + 1]``."""
    k = tokens.shape[1] - 1
    offsets = torch.tensor(sequence_offsets(vocab, k)[:-1], dtype=torch.int64, device=tokens.device)
    code = torch.zeros(tokens.shape[0], dtype=torch.int64, device=tokens.device)
    for position in range(k + 1):  # over positions, vectorised over rows
        emitted = position <= num_accepted
        code = torch.where(emitted, code * vocab + tokens[:, position].clamp_min(0), code)
    return offsets[num_accepted] + code


def sequence_of(index: int, vocab: int, k: int) -> tuple[int, ...]:
    """The emitted sequence with flat index ``index`` (inverse of :func:`sequence_index`)."""
    offsets = sequence_offsets(vocab, k)
    length = next(n for n in range(1, k + 2) if index < offsets[n])
    code = index - offsets[length - 1]
    tokens = []
    for _ in range(length):
        tokens.append(int(code % vocab))
        code //= vocab
    return tuple(reversed(tokens))


def all_sequences(vocab: int, length: int) -> torch.Tensor:
    """``[V**length, length]``: every sequence, in base-V order (first token most significant)."""
    if length == 0:
        return torch.zeros((1, 0), dtype=torch.int64)
    grids = torch.meshgrid(*[torch.arange(vocab)] * length, indexing="ij")
    return torch.stack([g.reshape(-1) for g in grids], dim=1)


# --- whole models, vectorised float64 -------------------------------------------------------


def target_law(model: Model, length: int) -> torch.Tensor:
    """``[V**length]``: the target's joint law of ``length`` tokens (base-V index)."""
    vocab = model.vocab_size
    sequences = all_sequences(vocab, length)
    law = torch.ones(sequences.shape[0], dtype=torch.float64)
    for i in range(length):
        probs = normalise(model.target(sequences[:, :i]))
        law = law * probs.gather(-1, sequences[:, i : i + 1]).squeeze(-1)
    return law


def emitted_law(model: Model, k: int) -> torch.Tensor:
    """Law of the emitted sequence of one canonical step, drafts drawn from the draft model.

    Indexed by :func:`sequence_index`; enumerates all ``V**K`` drafts (small models only).
    """
    vocab = model.vocab_size
    drafts = all_sequences(vocab, k)
    target_probs, draft_probs = step_inputs(model, drafts)
    q = normalise(draft_probs)
    weight = q.gather(-1, drafts.unsqueeze(-1)).squeeze(-1).prod(dim=-1)
    law = step_law(target_probs, draft_probs, drafts) * weight[:, None, None]
    offsets = sequence_offsets(vocab, k)
    result = torch.zeros(offsets[-1], dtype=torch.float64)
    token = torch.arange(vocab)
    for j in range(k + 1):
        prefix_code = torch.zeros(drafts.shape[0], dtype=torch.int64)
        for column in range(j):
            prefix_code = prefix_code * vocab + drafts[:, column]
        index = offsets[j] + prefix_code[:, None] * vocab + token[None, :]
        result.index_add_(0, index.reshape(-1), law[:, j].reshape(-1))
    return result


def completed_law(model: Model, k: int, emitted: torch.Tensor | None = None) -> torch.Tensor:
    """``[V**(K+1)]``: law of an emitted sequence completed to ``K+1`` tokens by the target.

    With ``emitted`` omitted, uses the canonical step's law; equal to :func:`target_law` exactly
    when the step is lossless.
    """
    vocab = model.vocab_size
    emitted = emitted_law(model, k) if emitted is None else emitted
    offsets = sequence_offsets(vocab, k)
    full = target_law(model, k + 1)
    result = torch.zeros_like(full)
    for length in range(1, k + 2):
        # target mass of each full sequence's first `length` tokens
        prefix_mass = full.reshape(vocab**length, -1).sum(dim=1)
        share = emitted[offsets[length - 1] : offsets[length]] / torch.where(prefix_mass > 0, prefix_mass, 1.0)
        result += (share[:, None] * full.reshape(vocab**length, -1)).reshape(-1)
    return result


# --- whole models, any number type ----------------------------------------------------------


def target_law_scalar(target: LawFn, vocab: int, length: int) -> dict[tuple[int, ...], Any]:
    """Exact joint law of ``length`` target tokens; ``target(prefix)`` gives the next-token law."""
    law: dict[tuple[int, ...], Any] = {}
    for sequence in itertools.product(range(vocab), repeat=length):
        mass: Any = Fraction(1)
        for i in range(length):
            row = _normalised(list(target(sequence[:i])))
            mass = mass * row[sequence[i]]
        law[sequence] = mass
    return law


def emitted_law_scalar(target: LawFn, draft: LawFn, vocab: int, k: int) -> dict[tuple[int, ...], Any]:
    """Exact law of one canonical step's emitted sequence, by enumeration of drafts and paths."""
    law: dict[tuple[int, ...], Any] = {}
    for drafts in itertools.product(range(vocab), repeat=k):
        weight: Any = Fraction(1)
        for i in range(k):
            weight = weight * _normalised(list(draft(drafts[:i])))[drafts[i]]
        if weight == 0:
            continue
        p = [list(target(drafts[:i])) for i in range(k + 1)]
        q = [list(draft(drafts[:i])) for i in range(k)]
        for j, row in enumerate(step_law_scalar(p, q, drafts)):
            for token, mass in enumerate(row):
                if mass != 0:
                    key = drafts[:j] + (token,)
                    law[key] = law.get(key, 0) + weight * mass
    return law


def stream_law_scalar(target: LawFn, draft: LawFn, vocab: int, k: int, length: int) -> dict[tuple[int, ...], Any]:
    """Exact law of the first ``length`` tokens of a stream of canonical steps.

    ``target(history)`` and ``draft(history)`` give next-token laws after the whole history emitted
    so far (a :class:`ChainModel` through :func:`chain_law_fns`).  Each step drafts ``k`` tokens.
    """
    memo: dict[tuple[int, ...], dict[tuple[int, ...], Any]] = {}

    def continue_from(history: tuple[int, ...]) -> dict[tuple[int, ...], Any]:
        remaining = length - len(history)
        if remaining <= 0:
            return {(): Fraction(1)}
        if history in memo:
            return memo[history]
        step = emitted_law_scalar(
            lambda prefix: target(history + prefix), lambda prefix: draft(history + prefix), vocab, k
        )
        law: dict[tuple[int, ...], Any] = {}
        for emitted, mass in step.items():
            taken = emitted[:remaining]
            for tail, tail_mass in continue_from(history + taken).items():
                key = taken + tail
                law[key] = law.get(key, 0) + mass * tail_mass
        memo[history] = law
        return law

    return continue_from(())


def chain_law_fns(model: ChainModel, exact: bool = True) -> tuple[LawFn, LawFn]:
    """``(target, draft)`` law functions of a chain after any history, for the scalar code."""
    convert = Fraction if exact else float
    order = model.order
    vocab = model.vocab_size
    target_rows = [[convert(x) for x in row] for row in model.target_table.tolist()]
    draft_rows = [[convert(x) for x in row] for row in model.draft_table.tolist()]

    def row_of(history: tuple[int, ...]) -> int:
        tail = (model.context + history)[-order:] if order else ()
        index = 0
        for token in tail:
            index = index * vocab + token
        return index

    return (lambda h: target_rows[row_of(h)]), (lambda h: draft_rows[row_of(h)])


def model_law_fns(model: Model, exact: bool = True) -> tuple[LawFn, LawFn]:
    """``(target, draft)`` law functions of any model after a prefix of the current step."""
    convert = Fraction if exact else float

    def wrap(fn: Callable[[torch.Tensor], torch.Tensor]) -> LawFn:
        def law(prefix: tuple[int, ...]) -> list[Any]:
            row = fn(torch.tensor([list(prefix)], dtype=torch.int64).reshape(1, len(prefix)))
            return [convert(x) for x in row[0].tolist()]

        return law

    return wrap(model.target), wrap(model.draft)
