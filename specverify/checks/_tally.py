"""Experiments: run the sampler on cases, tally what it emits, say where a tally deviates.

Two experiments serve every statistical check:

* :func:`step_counts`: fixed step inputs (one or several cases interleaved in one heterogeneous
  batch), tallied as counts of (accepted drafts, last token) per case;
* :func:`model_tally`: drafts drawn by the harness from a model's draft law, the emitted sequences
  tallied, and each one completed to ``K + 1`` tokens with the target, so its law can be set
  against the target's own joint law.

Work is done in units of rows (:mod:`specverify._calling.pool`), each seeded from the experiment's
seed and its index and run on any of the run's workers, its counts tallied where its outputs land;
nothing loops over samples in Python.  :func:`plan_samples` sizes
an experiment for a test; :func:`largest_deviation` names, in words, where counts and their
expectation differ most.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import numpy as np
import torch

from .._calling.pool import UNIT_ROWS, unit_seed, unit_spans
from .._laws.cases import ModelCase, StepCase
from .._laws.exact import sequence_offsets
from .._laws.models import draw_drafts, sample_next, step_inputs
from .._layout import StepInputs
from .._seeds import derive_seed
from ._base import Context
from ._step_table import step_table

__all__ = [
    "ModelTally",
    "ModelUnit",
    "StepUnit",
    "adjacent_counts",
    "count_adjacent",
    "count_steps",
    "largest_deviation",
    "model_tallies",
    "model_tally",
    "plan_samples",
    "stack_cases",
    "step_counts",
    "tally",
    "tally_model",
    "tally_models",
]

CHUNK = 16_384  # rows tallied at a time, as the harness calls a sampler


def plan_samples(
    ctx: Context, df: int, alpha: float, groups: int = 1, *, power: float | None = None, factor: int = 1
) -> int:
    """Samples per group for a level-``alpha`` test with ``df`` to detect the budget's TV at
    ``power`` (a stage's power unless given), times ``factor``, under the cap of one of ``groups``
    decisions: the budget's rule (:meth:`~specverify.Budget.sample_size`) as a two-stage check asks it."""
    power = ctx.budget.stage_power if power is None else power
    return ctx.budget.sample_size(df, alpha, power=power, decisions=groups, factor=factor).samples


def largest_deviation(observed: np.ndarray, expected: np.ndarray, label) -> str:
    """Where observed and expected counts differ most, in words; an impossible outcome first."""
    observed = np.atleast_2d(observed).astype(np.float64)
    expected = np.atleast_2d(expected)
    impossible = (expected == 0) & (observed > 0)
    if impossible.any():  # decisive on its own: no sampling error explains it
        g, c = np.unravel_index(int(np.argmax(np.where(impossible, observed, -1))), observed.shape)
        return f"outcome of exact probability 0 at {label(g, c)}: observed {int(observed[g, c])}"
    score = np.abs(observed - expected) / np.sqrt(np.maximum(expected, 1.0))
    g, c = np.unravel_index(int(np.argmax(score)), score.shape)
    return f"largest deviation at {label(g, c)}: observed {int(observed[g, c])}, expected {expected[g, c]:.1f}"


def stack_cases(cases: list[StepCase]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.stack([c.target_probs for c in cases]),
        torch.stack([c.draft_probs for c in cases]),
        torch.stack([c.draft_tokens for c in cases]),
    )


def tally(counts: np.ndarray, codes: np.ndarray) -> None:
    """Add one to ``counts`` at each code: in time that grows with the codes, not with the cells
    (a chunk of 16 rows at V = 262,144 touches 16 of millions of cells)."""
    if codes.size * 8 >= counts.size:
        counts += np.bincount(codes, minlength=counts.size)
    else:
        cells, hits = np.unique(codes, return_counts=True)
        counts[cells] += hits


@dataclasses.dataclass(frozen=True)
class StepUnit:
    """Rows ``start:stop`` of a fixed-inputs experiment: the cases (stacked) interleaved row by row,
    the sampler's generator seeded ``seed``.  A unit is independent of which worker runs it."""

    target: torch.Tensor
    draft: torch.Tensor
    drafts: torch.Tensor
    start: int
    stop: int
    seed: int
    dtype: torch.dtype
    cells: int


def count_steps(sut: Any, unit: StepUnit) -> np.ndarray:
    """A :class:`StepUnit`'s outcome counts ``[cases * cells]``, tallied as its outputs land (counts
    travel back, not tokens)."""
    return next(count_steps_streamed(sut, [unit]))


def count_steps_streamed(sut: Any, units: Iterable[StepUnit]) -> Iterator[np.ndarray]:
    """:func:`count_steps` of each unit, in one stream of calls (:func:`_streamed`)."""

    def fold(unit: StepUnit, counts: np.ndarray, which: torch.Tensor, codes: torch.Tensor) -> None:
        tally(counts, (which * unit.cells + codes).numpy())

    return _streamed(
        sut,
        units,
        lambda unit: _StepCount(sut, unit, np.zeros(unit.target.shape[0] * unit.cells, dtype=np.int64), fold),
    )


def count_adjacent(sut: Any, unit: StepUnit) -> np.ndarray:
    """A one-case :class:`StepUnit`'s joint counts ``[cells * cells]`` of the outcomes of rows
    ``2i`` and ``2i + 1`` (adjacent rows of a batch; consecutive calls of a one-row sampler)."""
    return next(count_adjacent_streamed(sut, [unit]))


def count_adjacent_streamed(sut: Any, units: Iterable[StepUnit]) -> Iterator[np.ndarray]:
    """:func:`count_adjacent` of each unit, in one stream of calls (:func:`_streamed`)."""

    def fold(unit: StepUnit, counts: np.ndarray, which: torch.Tensor, codes: torch.Tensor) -> None:
        tally(counts, (codes[0::2] * unit.cells + codes[1::2]).numpy())

    return _streamed(sut, units, lambda unit: _StepCount(sut, unit, np.zeros(unit.cells**2, dtype=np.int64), fold))


setattr(count_steps, "streamed", count_steps_streamed)  # noqa: B010 - the form a pool streams units by (specverify._calling.pool)
setattr(count_adjacent, "streamed", count_adjacent_streamed)  # noqa: B010


class _Run(Protocol):
    """One unit in a stream of calls: its chunks' inputs (drawn one ahead of the outputs), what it
    makes of each chunk's output, and its result once the last has landed."""

    generator: torch.Generator  # the sampler's, for every call of the unit
    chunks: int

    def batches(self) -> Iterator[tuple[torch.Tensor, ...]]: ...

    def take(self, output: tuple[torch.Tensor, torch.Tensor]) -> None: ...

    def result(self) -> Any: ...


def _streamed(sut: Any, units: Iterable[Any], run_of: Callable[[Any], _Run]) -> Iterator[Any]:
    """Each unit's result (``run_of(unit)``), the units' calls in one stream: a unit's first call
    is sent while the last one's output is tallied, so an isolated sampler's process is kept busy
    between units too.  Each unit's calls draw from its own generator, and its inputs from its own
    streams: the result of the unit alone."""
    pending = iter(units)
    first = next(pending, None)
    if first is None:
        return
    order: collections.deque[tuple[_Run, bool]] = (
        collections.deque()
    )  # each chunk sent: its unit's run, and whether it is the last

    def batches() -> Iterator[tuple[Any, ...]]:
        for unit in itertools.chain([first], pending):
            run = run_of(unit)
            if unit.dtype != first.dtype or run.chunks == 0:
                raise ValueError("the units of one stream are of one dtype, each of at least one row")
            for index, batch in enumerate(run.batches()):
                order.append((run, index == run.chunks - 1))
                yield (*batch, run.generator)

    for output in sut.steps(batches(), dtype=first.dtype):
        run, last = order.popleft()
        run.take(output)
        if last:
            yield run.result()


class _StepCount:
    """A :class:`StepUnit` in a stream: ``counts``, added to by ``fold(unit, counts, case index,
    outcome code)`` as each chunk's output lands."""

    def __init__(
        self,
        sut: Any,
        unit: StepUnit,
        counts: np.ndarray,
        fold: Callable[[StepUnit, np.ndarray, torch.Tensor, torch.Tensor], None],
    ) -> None:
        self.sut, self.unit, self.counts, self._fold = sut, unit, counts, fold
        self.generator = sut.generator(unit.seed)
        self.chunks = len(range(unit.start, unit.stop, CHUNK))
        self._given: collections.deque[tuple[torch.Tensor, StepInputs]] = collections.deque()

    def batches(self) -> Iterator[tuple[torch.Tensor, ...]]:
        for which, *batch in _chunks(self.unit):
            self._given.append((which, StepInputs(*batch)))
            yield tuple(batch)

    def take(self, output: tuple[torch.Tensor, torch.Tensor]) -> None:
        which, batch = self._given.popleft()
        self._fold(self.unit, self.counts, which, self.sut.layout.outcome(batch, output))

    def result(self) -> np.ndarray:
        return self.counts


def _chunks(unit: StepUnit) -> Iterator[tuple[torch.Tensor, ...]]:
    """A unit's chunks of rows: each chunk's case index per row, and its batch (target, draft
    probabilities, draft tokens)."""
    cases = unit.target.shape[0]
    batches = _phase_batches(unit)  # a chunk's rows depend on its phase only, in every unit of the experiment
    for start in range(unit.start, unit.stop, CHUNK):
        phase = (start % cases, min(CHUNK, unit.stop - start))
        if phase not in batches:
            which = torch.arange(start, start + phase[1]) % cases
            batches[phase] = (which, unit.target[which], unit.draft[which], unit.drafts[which])
        yield batches[phase]  # the same tensors again: the sampler's copy of them is reused


_held = threading.local()  # each harness thread's batches of its current experiment


def _phase_batches(unit: StepUnit) -> dict[tuple[int, int], tuple[torch.Tensor, ...]]:
    """The batches built for the experiment ``unit`` belongs to (the same stacked cases and
    dtype), kept by this thread from one unit to the next: each unit's rows are the same batch again (its phase
    is 0, :func:`step_counts`), built once, and passed as the same tensors, so the worker's
    shared-memory copy of them is written once too."""
    held = getattr(_held, "batches", None)
    # the stacked cases are small ([cases, K+1, V]): their bytes say it is the same experiment's,
    # also where each unit arrives as fresh tensors (a worker's process)
    key = (
        unit.dtype,
        unit.cells,
        *((tuple(t.shape), t.dtype, t.numpy().tobytes()) for t in (unit.target, unit.draft, unit.drafts)),
    )
    if held is None or held[0] != key:
        held = (key, {})
        _held.batches = held
    return held[1]


def step_counts(
    ctx: Context,
    cases: list[StepCase],
    rows_per_case: int,
    seed: int,
    *,
    stop: Callable[[np.ndarray], bool] | None = None,
) -> np.ndarray:
    """``[cases, (K+1) * V]`` outcome counts (coded by the sampler's layout), the cases interleaved
    row by row; the rows are cut into units (:mod:`specverify._calling.pool`) run on the run's
    workers, so the counts do not depend on how many there are.

    ``stop`` is asked after every unit, in unit order, with the counts so far, whether to stop
    early (an anytime-valid test that has already rejected).
    """
    k, vocab = cases[0].shape_key
    cells = (k + 1) * vocab
    target, draft, drafts = stack_cases(cases)
    dtype = ctx.dtype_for(cases[0].precision)
    counts = np.zeros(len(cases) * cells, dtype=np.int64)
    # units of a whole number of cycles of the cases, so that every full unit is the same batch
    spans = unit_spans(rows_per_case * len(cases), UNIT_ROWS - UNIT_ROWS % len(cases))
    units = (
        StepUnit(target, draft, drafts, start, stop_, unit_seed(seed, i), dtype, cells) for i, start, stop_ in spans
    )
    for (_, start, stop_), unit_counts in zip(spans, ctx.units(count_steps, units)):
        counts += unit_counts
        ctx.advance(stop_ - start)
        if stop is not None and stop(counts.reshape(len(cases), cells)):
            break
    return counts.reshape(len(cases), cells)


def adjacent_counts(ctx: Context, case: StepCase, pairs: int, seed: int) -> np.ndarray:
    """``[cells, cells]`` joint outcome counts of ``pairs`` pairs of adjacent rows, every row the same
    case: in units on the run's workers (each a whole number of pairs), tallied where they run."""
    k, vocab = case.shape_key
    cells = (k + 1) * vocab
    target, draft, drafts = stack_cases([case])
    counts = np.zeros(cells * cells, dtype=np.int64)
    spans = unit_spans(2 * pairs)  # UNIT_ROWS and the chunk are even: no pair straddles two units
    units = (
        StepUnit(target, draft, drafts, start, stop, unit_seed(seed, i), ctx.dtype_for(case.precision), cells)
        for i, start, stop in spans
    )
    for (_, start, stop), unit_counts in zip(spans, ctx.units(count_adjacent, units)):
        counts += unit_counts
        ctx.advance(stop - start)
    return counts.reshape(cells, cells)


@dataclasses.dataclass
class ModelTally:
    """What a sampler emitted on a model, tallied three ways."""

    emitted: np.ndarray  # counts per emitted sequence (index: the layout's sequence, sequence_index's order)
    completed: np.ndarray  # counts per completed K+1 sequence (base-V index)
    accepted: np.ndarray  # counts of num_accepted = 0..K

    @property
    def samples(self) -> int:
        return int(self.accepted.sum())

    def __iadd__(self, other: ModelTally) -> ModelTally:
        self.emitted += other.emitted
        self.completed += other.completed
        self.accepted += other.accepted
        return self


@dataclasses.dataclass(frozen=True)
class ModelUnit:
    """``rows`` samples of a model experiment: drafts drawn from the model's draft law (stream
    ``harness``), the sampler run (stream ``sampler``), its output completed with the target (stream
    ``completion``)."""

    case: ModelCase
    rows: int
    harness: int
    completion: int
    sampler: int
    dtype: torch.dtype


class _UnitTally:
    """One :class:`ModelUnit` as its outputs come back: its chunks of inputs, drawn (``batches``),
    and the three tallies of what the sampler emitted on them (``take``, then ``result``).  A
    table model's drafts are drawn and completed from its step table (:mod:`._step_table`), any
    other model's position by position."""

    def __init__(self, sut: Any, unit: ModelUnit) -> None:
        self.sut, self.unit = sut, unit
        self.generator = sut.generator(unit.sampler)
        self.tally = _no_tally(unit.case)
        self._harness = torch.Generator().manual_seed(unit.harness)
        self._completion = torch.Generator().manual_seed(unit.completion)
        self._table = step_table(unit.case.model, unit.case.k)
        self._given: collections.deque[StepInputs] = collections.deque()  # drawn, not yet tallied (read ahead)
        self.chunks = len(range(0, unit.rows, CHUNK))

    def batches(self) -> Iterator[StepInputs]:
        model, k = self.unit.case.model, self.unit.case.k
        for start in range(0, self.unit.rows, CHUNK):
            rows = min(CHUNK, self.unit.rows - start)
            if self._table is None:
                laws: list[torch.Tensor] = []
                drafts = draw_drafts(model, rows, k, self._harness, probs=laws)
                self._given.append(StepInputs(*step_inputs(model, drafts, laws), drafts))
            else:  # a draft sequence drawn whole, its inputs one gather: the values step_inputs would look up
                self._given.append(self._table.inputs(self._table.draw(rows, self._harness), self.unit.dtype))
            yield self._given[-1]

    def take(self, output: tuple[torch.Tensor, torch.Tensor]) -> None:
        (tokens, accepted), k, vocab, tally = output, self.unit.case.k, self.unit.case.vocab_size, self.tally
        tally.emitted += np.bincount(
            self.sut.layout.sequence(self._given.popleft(), (tokens, accepted)).numpy(), minlength=tally.emitted.size
        )
        tally.accepted += np.bincount(accepted.numpy(), minlength=k + 1)
        if self._table is None:
            completed = _complete(self.unit.case.model, tokens, accepted, self._completion)
            code = torch.zeros(accepted.shape[0], dtype=torch.int64)
            for position in range(k + 1):  # over positions, vectorised over rows
                code = code * vocab + completed[:, position]
            tally.completed += np.bincount(code.numpy(), minlength=tally.completed.size)

    def result(self) -> ModelTally:
        if self._table is not None:  # the unit's emitted counts completed at once, as counts
            self.tally.completed += self._table.complete(
                self.tally.emitted, np.random.default_rng(self.unit.completion)
            )
        return self.tally


def tally_models(sut: Any, units: Iterable[ModelUnit]) -> Iterator[ModelTally]:
    """:func:`tally_model` of each unit, in one stream of calls (:func:`_streamed`)."""
    return _streamed(sut, units, lambda unit: _UnitTally(sut, unit))


def tally_model(sut: Any, unit: ModelUnit) -> ModelTally:
    """A :class:`ModelUnit`'s three tallies.  The next chunk's drafts are drawn while the sampler
    works on this chunk (``steps``), before this chunk's completions: streams of their own."""
    return next(tally_models(sut, [unit]))


setattr(tally_model, "streamed", tally_models)  # noqa: B010 - the form a pool streams units of this work by (specverify._calling.pool)


def model_tally(
    ctx: Context, case: ModelCase, samples: int, seed: int, *, stop: Callable[[ModelTally], bool] | None = None
) -> ModelTally:
    """Draw drafts from the case's draft model, run the sampler, complete with the target: in units
    on the run's workers (each unit's three streams derive from its own seed).

    ``stop`` is asked after every unit, in unit order, with the tally so far, whether to stop early
    (a futility look, :class:`~specverify.checks._looks.FutilityLooks`)."""
    total = _no_tally(case)
    for part in ctx.units(tally_model, _model_units(ctx, case, samples, seed)):
        total += part
        ctx.advance(part.samples)
        if stop is not None and stop(total):
            break
    return total


def model_tallies(ctx: Context, experiments: list[tuple[ModelCase, int, int]]) -> list[ModelTally]:
    """:func:`model_tally` of each ``(case, samples, seed)`` (no stop), the experiments' units in
    one stream on the run's workers: a worker that runs the last unit of one experiment does not
    leave the others idle, as experiments of one or two units run one after another would.  The
    same units and seeds, summed in the same order: the tallies each experiment gives alone."""
    if len({ctx.dtype_for(case.precision) for case, _, _ in experiments}) > 1:  # a stream is of one dtype
        return [model_tally(ctx, case, samples, seed) for case, samples, seed in experiments]
    owner = [index for index, (_, samples, _) in enumerate(experiments) for _ in unit_spans(samples)]
    units = itertools.chain.from_iterable(_model_units(ctx, *experiment) for experiment in experiments)
    totals = [_no_tally(case) for case, _, _ in experiments]
    for index, part in zip(owner, ctx.units(tally_model, units)):
        totals[index] += part
        ctx.advance(part.samples)
    return totals


def _model_units(ctx: Context, case: ModelCase, samples: int, seed: int) -> Iterator[ModelUnit]:
    """A model experiment's units, each with streams from its own seed (not the run's): a repro
    given ``seed`` draws the same rows."""
    dtype = ctx.dtype_for(case.precision)
    for i, start, end in unit_spans(samples):
        s = unit_seed(seed, i)
        yield ModelUnit(case, end - start, derive_seed(s, "harness"), derive_seed(s, "completion"), s, dtype)


def _no_tally(case: ModelCase) -> ModelTally:
    k, vocab = case.k, case.vocab_size
    return ModelTally(
        np.zeros(sequence_offsets(vocab, k)[-1], dtype=np.int64),
        np.zeros(vocab ** (k + 1), dtype=np.int64),
        np.zeros(k + 1, dtype=np.int64),
    )


def _complete(model, tokens: torch.Tensor, accepted: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Fill the positions after each row's emitted tokens with target samples."""
    completed = tokens.clone()
    for position in range(1, tokens.shape[1]):  # over positions, vectorised over rows
        missing = position > accepted
        if missing.any():
            prefix = completed[missing, :position]
            completed[missing, position] = sample_next(model.target(prefix), generator)
    return completed
