"""Step cases: the fixed inputs of one verification step, ordinary and on the edges engines fall off."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from ..._laws.cases import StepCase
from .pairs import PAIR_KINDS, pair_rows
from .vectors import LOW_PRECISIONS, PRECISIONS, draw_positions, vocab_sizes

__all__ = ["EDGE_KINDS", "MIXABLE_STEP_KINDS", "MIXED", "STEP_KINDS", "case_precision", "step_batches", "step_cases"]

#: Named edge-case families of step cases (every pair kind but ``random``; the original six first).
EDGE_KINDS = tuple(kind for kind in PAIR_KINDS if kind != "random")

#: Every kind a step case can be asked for; ``MIXED`` draws one of them per case.
STEP_KINDS = PAIR_KINDS

#: The kind that draws a kind for each case (or each model) of a batch, and a precision for all.
MIXED = "mixed"

#: What ``mixed`` draws from: precision is drawn on its own, so ``low-precision`` is left out.
MIXABLE_STEP_KINDS = tuple(kind for kind in STEP_KINDS if kind != "low-precision")


def _check_kind(kind: str, kinds: tuple[str, ...], precision: str | None) -> None:
    if kind != MIXED and kind not in kinds:
        raise ValueError(f"unknown case kind {kind!r}; choose one of {', '.join((*kinds, MIXED))}")
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if kind == "low-precision" and precision == "float64":
        raise ValueError("kind 'low-precision' needs a precision below float64 (or None to draw one)")


def case_precision(draw: st.DrawFn, kind: str, precision: str | None) -> str:
    """The precision a case is rounded to: the one asked for, else drawn for ``low-precision``
    (bf16, fp16, fp32) and ``mixed`` (any, shrinking toward float64), else float64."""
    if precision is not None:
        return precision
    if kind == "low-precision":
        return draw(st.sampled_from(LOW_PRECISIONS))
    if kind == MIXED:
        return draw(st.sampled_from(PRECISIONS))
    return "float64"


def _draft_tokens(draw: st.DrawFn, drafts: torch.Tensor) -> torch.Tensor:
    """One token per row of ``drafts``, from that row's support (shrinks toward its first token).

    The ``j``-th token of the support is drawn, so a token with ``q(y) = 0`` is never chosen.
    """
    live = drafts > 0
    count = live.sum(dim=1)
    choice = torch.from_numpy(draw_positions(draw, drafts.shape[0], drafts.shape[1])) % count
    # the column where the running count of live tokens first passes ``choice``
    return (live.cumsum(dim=1) <= choice[:, None]).sum(dim=1)


def step_cases(
    *,
    vocab_size: int | None = None,
    k: int | None = None,
    max_vocab: int = 8,
    max_k: int = 4,
    kind: str = "random",
    precision: str | None = None,
) -> st.SearchStrategy[StepCase]:
    """Fixed inputs of one verification step: ``target [K+1, V]``, ``draft [K, V]``, drafts ``[K]``.

    ``kind`` is one of :data:`STEP_KINDS` (or ``"mixed"``); ``precision`` rounds every probability
    (not renormalised) and is recorded as ``StepCase.precision``: ``None`` means float64, except
    for ``low-precision``, which draws bf16, fp16 or fp32.  Each draft token has ``q(y) > 0``.
    Shrinks toward ``V = 2``, ``K = 1`` and simple numbers.
    """
    _check_kind(kind, STEP_KINDS, precision)
    return _step_cases(vocab_size, k, max_vocab, max_k, kind, precision)


@st.composite
def _step_cases(
    draw: st.DrawFn, vocab_size: int | None, k: int | None, max_vocab: int, max_k: int, kind: str, precision: str | None
) -> StepCase:
    vocab = vocab_size if vocab_size is not None else draw(vocab_sizes(2, max_vocab))
    k = k if k is not None else draw(st.integers(1, max_k))
    precision = case_precision(draw, kind, precision)
    if kind == MIXED:
        kind = draw(st.sampled_from(MIXABLE_STEP_KINDS))
    targets, drafts = pair_rows(draw, k + 1, vocab, kind, precision)
    drafts = drafts[:k]
    return StepCase(targets, drafts, _draft_tokens(draw, drafts), label=kind, precision=precision)


def step_batches(
    *,
    max_vocab: int = 8,
    max_k: int = 4,
    max_cases: int = 4,
    kind: str = "random",
    precision: str | None = None,
    vocab_size: int | None = None,
    k: int | None = None,
) -> st.SearchStrategy[list[StepCase]]:
    """Several step cases of one ``(K, V)`` and one precision, for one heterogeneous batch.

    With ``kind="mixed"`` every case draws its own kind, so a batch's rows differ in kind as
    well as in numbers.  Shrinks toward a single case.
    """
    _check_kind(kind, STEP_KINDS, precision)
    if max_cases < 1:
        raise ValueError(f"max_cases must be at least 1, got {max_cases}")
    return _step_batches(vocab_size, k, max_vocab, max_k, max_cases, kind, precision)


@st.composite
def _step_batches(
    draw: st.DrawFn,
    vocab_size: int | None,
    k: int | None,
    max_vocab: int,
    max_k: int,
    max_cases: int,
    kind: str,
    precision: str | None,
) -> list[StepCase]:
    vocab = vocab_size if vocab_size is not None else draw(vocab_sizes(2, max_vocab))
    k = k if k is not None else draw(st.integers(1, max_k))
    # one precision for the whole batch: the harness passes a batch in one dtype
    precision = case_precision(draw, kind, precision)
    case = _step_cases(vocab, k, max_vocab, max_k, kind, precision)
    return draw(st.lists(case, min_size=1, max_size=max_cases))
