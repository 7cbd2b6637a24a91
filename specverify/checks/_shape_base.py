"""Shared pieces of the ``shapes`` family: production shapes, rows per call, lumped laws, units, hangs.

The family's checks (:mod:`._shapes`, :mod:`._shape_target`, :mod:`._shape_grid`) size their rows
and calls here, and share one record of a hang: after a hang the hung call is still running inside
the sampler, so no later check of the family calls it again.  A check's experiments (one a shape or
a case) are cut into units and run together (:func:`run_together`): on a run of several workers
they share the shapes' rows, and a unit's rows and seed depend on its shape alone, never on the
worker count, so the counts are the same for any count.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .._calling.pool import UNIT_ROWS, unit_seed, unit_spans
from .._calling.sut import SamplerUnderTest
from .._laws.cases import StepCase
from .._record.reach import Reach, merge
from .._record.result import CheckResult
from ..errors import SamplerFault, Violation
from ._base import Context

__all__ = [
    "CONDITIONAL_SHAPES",
    "EDGE_ACTIVE",
    "EDGE_SHAPE",
    "EDGE_VOCAB",
    "FULL_DOMAIN_SHAPE",
    "LumpedUnit",
    "MAX_CALL_ELEMENTS",
    "MAX_CALL_ROWS",
    "MIN_ROWS",
    "Ran",
    "TARGET_SHAPES",
    "UNIT_ELEMENTS",
    "Shape",
    "beyond_budget",
    "bounded",
    "call_rows",
    "earlier_hang",
    "count_lumped",
    "lumped_law",
    "lumped_units",
    "not_run",
    "planned_rows",
    "remember_hang",
    "run_together",
    "shape_spans",
]

#: Most input elements (rows x (2K+1) x V) in one call: bounds the harness's memory, and keeps each
#: call's tensors small enough to be reused from the heap (larger ones are fresh pages every call,
#: and the page faults cost more than the sampler's arithmetic: measured, 15x the system time).
MAX_CALL_ELEMENTS = 2**21
#: Most rows in one call (more where a sampler's max_batch allows nothing larger).
MAX_CALL_ROWS = 512
#: Fewest rows a shape is given, whatever the budget affords.
MIN_ROWS = 64
#: Most input elements (rows x (2K+1) x V) in one unit of a shape's experiment, so that a large
#: vocabulary's rows are shared by the workers too (a unit at V = 256,000 is a second or two).
UNIT_ELEMENTS = 2**28

# After a hang the hung call is still running inside the sampler: this family makes no further call
# in the run (a second call would run beside it, and each hang costs its time limit).
_HANGS: weakref.WeakKeyDictionary[SamplerUnderTest, tuple[str, SamplerFault]] = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class Shape:
    """A production shape: ``V`` tokens, ``K`` drafts, how far drafts are surely accepted, and
    the active tokens per position (fewer at large ``K``, so the cells stay few); ``tag`` names a
    second case at the same ``V`` and ``K`` (it is part of the label, so of the result's id)."""

    vocab: int
    k: int
    accept_until: int = 0
    actives: int = 4
    rows_per_call: int | None = None  # a large batch on purpose (default: what memory allows)
    tag: str = ""

    @property
    def label(self) -> str:
        return f"{self.vocab}x{self.k}" + (f"-{self.tag}" if self.tag else "")

    def row_elements(self) -> int:
        return (2 * self.k + 1) * self.vocab


#: Shapes of the conditional law: K > 8 across the first tile boundary (residuals drawn at positions
#: 8 to 15; and again with the first 15 drafts surely accepted, so half the rows take the bonus token
#: after 16 accepts, which the first case reaches one row in 256), 512-row calls, the int16 range, a
#: common size, the largest vocabulary (K small where V is large: the sampler reads (2K+1) V floats
#: a row).
CONDITIONAL_SHAPES = (
    Shape(1_025, 16, accept_until=8, actives=2),
    Shape(1_025, 16, accept_until=15, actives=2, tag="bonus"),
    Shape(4_097, 3, rows_per_call=MAX_CALL_ROWS),
    Shape(65_537, 1, actives=3),
    Shape(128_256, 1, actives=3),
    Shape(262_144, 1, actives=3),
)
#: Shape of the full-domain identity test (every one of its (K+1) V cells, no lumping).
FULL_DOMAIN_SHAPE = Shape(1_025, 2)
#: Shape of the float-edge law cases (K = 2 drafts at EDGE_VOCAB tokens).
EDGE_SHAPE = Shape(1_025, 2)
#: Shapes of the target's own law and of acceptance: the common vocabulary sizes, and every shape
#: the conditional and edge checks use, so that a sampler which differs from the canonical law there
#: has target-law evidence at the same shape (a lossless-type verdict needs it: specverify.judge).
TARGET_SHAPES = (
    EDGE_SHAPE,
    *(dataclasses.replace(s, accept_until=0, rows_per_call=None) for s in CONDITIONAL_SHAPES if not s.tag),
    Shape(32_000, 2, actives=3),
    Shape(151_936, 1, actives=3),
    Shape(256_000, 1, actives=3),
)
#: Vocabulary of the float-edge cases (the dominant token's id, the last, crosses the 1,024 boundary).
EDGE_VOCAB = 1_025
#: A token of an edge case is a cell of its own from this mass on (smooth laws lump the rest).
EDGE_ACTIVE = 0.02


def call_rows(sut: SamplerUnderTest, shape: Shape) -> int:
    """Rows per call at ``shape``: up to :data:`MAX_CALL_ROWS`, the sampler's max_batch, and memory."""
    rows = shape.rows_per_call or min(MAX_CALL_ROWS, max(1, MAX_CALL_ELEMENTS // shape.row_elements()))
    return min(rows, sut.capabilities.max_batch or rows) if sut.capabilities.batched else 1


def bounded(sut: SamplerUnderTest, shape: Shape) -> tuple[Shape, str | None]:
    """The shape within the sampler's declared limits, and what was reduced (``None`` if nothing)."""
    caps = sut.capabilities
    vocab = min(shape.vocab, caps.max_vocab or shape.vocab)
    k = min(shape.k, caps.max_k or shape.k)
    if (vocab, k) == (shape.vocab, shape.k):
        return shape, None
    return Shape(
        vocab, k, min(shape.accept_until, k), shape.actives, shape.rows_per_call, shape.tag
    ), f"V={shape.vocab:,}, K={shape.k} reduced to V={vocab:,}, K={k} by the sampler's declared max_vocab/max_k"


def planned_rows(ctx: Context, shape: Shape, df: int, alpha: float) -> tuple[int, int]:
    """``(rows, needed)``: rows for the budget's shape TV, bounded by what its volume affords."""
    cap = min(ctx.budget.volume_cap(shape.row_elements()), ctx.budget.max_samples)
    size = ctx.budget.sample_size(df, alpha, tv=ctx.budget.shape_tv, cap=cap, floor=MIN_ROWS)
    return size.samples, size.needed


def lumped_law(case: StepCase, cells: torch.Tensor, n_cells: int) -> np.ndarray:
    """``[(K+1) * C]``: the exact law of (accepted drafts, cell of the last token)."""
    law = case.law()  # [K+1, V], float64, once per case
    lumped = torch.zeros((case.k + 1, n_cells), dtype=torch.float64)
    lumped.index_add_(1, cells, law)
    return lumped.reshape(-1).numpy()


def earlier_hang(ctx: Context) -> SamplerFault | None:
    """The hang an earlier check of this run saw, as this check's fault (``None`` if none)."""
    earlier = _HANGS.get(ctx.sut)
    if earlier is None:
        return None
    v = earlier[1].violation
    return SamplerFault(
        Violation(
            v.rule, f"{v.message} (in {earlier[0]}; the hung call still runs, so no further call is made)", v.finding
        )
    )


def remember_hang(ctx: Context, where: str, fault: SamplerFault) -> None:
    """Record a hang, so that later large-shape checks do not call the sampler again."""
    if fault.violation.rule == "hang" and ctx.sut not in _HANGS:
        _HANGS[ctx.sut] = (where, fault)


def shape_spans(rows: int, per_call: int, row_elements: int) -> list[tuple[int, int, int]]:
    """``(index, start, stop)`` of each unit of an experiment of ``rows`` rows at a shape: a whole
    number of calls, at most :data:`UNIT_ROWS` rows and about :data:`UNIT_ELEMENTS` elements (a
    function of the shape alone, so the units are the same for any worker count)."""
    calls = max(1, min(UNIT_ROWS, UNIT_ELEMENTS // row_elements) // per_call)
    return unit_spans(rows, calls * per_call)


@dataclasses.dataclass(frozen=True)
class LumpedUnit:
    """``rows`` rows of a structured case in calls of ``per_call`` rows, the sampler's generator
    seeded ``seed``; counted as (accepted drafts, cell of the last token).  A unit is independent
    of which worker runs it."""

    case: StepCase
    cells: torch.Tensor
    n_cells: int
    rows: int
    seed: int
    dtype: torch.dtype
    per_call: int
    harness: int | None = None  # the harness's stream, where it draws the drafts (shapes.target-law)

    @property
    def call_elements(self) -> int:
        """Input elements of the unit's largest call (its time limit is a call's of this size)."""
        return self.per_call * (2 * self.case.k + 1) * self.case.vocab_size


def count_lumped(sut: Any, unit: LumpedUnit) -> np.ndarray:
    """A :class:`LumpedUnit`'s ``[(K+1) * C]`` outcome counts, tallied as its outputs land."""
    case, n_cells = unit.case, unit.n_cells
    counts = np.zeros((case.k + 1) * n_cells, dtype=np.int64)
    batches = (
        case.batch(min(unit.per_call, unit.rows - start)) for start in range(0, unit.rows, unit.per_call)
    )  # over calls, not rows
    for tokens, accepted in sut.steps(batches, generator=sut.generator(unit.seed), dtype=unit.dtype):
        last = tokens.gather(1, accepted[:, None])[:, 0]
        counts += np.bincount((accepted * n_cells + unit.cells[last]).numpy(), minlength=counts.size)
    return counts


def lumped_units(
    ctx: Context,
    case: StepCase,
    cells: torch.Tensor,
    n_cells: int,
    rows: int,
    seed: int,
    per_call: int,
    harness: int | None = None,
) -> list[LumpedUnit]:
    """The units of ``rows`` rows of ``case`` (unit 0 seeded ``seed``, and ``harness``: one unit
    draws what one stream of calls drew)."""
    dtype = ctx.dtype_for(case.precision)
    spans = shape_spans(rows, per_call, (2 * case.k + 1) * case.vocab_size)
    return [
        LumpedUnit(
            case,
            cells,
            n_cells,
            stop - start,
            unit_seed(seed, i),
            dtype,
            per_call,
            None if harness is None else unit_seed(harness, i),
        )
        for i, start, stop in spans
    ]


@dataclasses.dataclass
class Ran:
    """One experiment of :func:`run_together`: its units' results summed, or the fault that ended
    it, or the hang that left it unrun; and what its units gave the sampler."""

    result: Any = None
    fault: SamplerFault | None = None
    not_run: SamplerFault | None = None
    reach: Reach | None = None

    def reach_of(self, kind: str) -> Reach | None:
        return dataclasses.replace(self.reach, kinds=(kind,)) if self.reach is not None else None


def run_together(
    ctx: Context,
    work: Callable[[Any, Any], Any],
    experiments: Sequence[Sequence[Any]],
    ids: Sequence[str],
    *,
    stop_at_fault: bool = False,
) -> list[Ran]:
    """Every experiment's units (``work(sut, unit)``) in one stream over the run's workers, each
    experiment's results summed (arrays, or tuples of arrays).  A fault ends its experiment (the
    others go on, unless ``stop_at_fault``); after a hang (remembered under the experiment's id)
    the experiments left are not run."""
    ran = [Ran() for _ in experiments]
    reaches: list[list[Reach | None]] = [[] for _ in experiments]
    first = 0
    while first < len(experiments):
        pairs = [(i, unit) for i in range(first, len(experiments)) for unit in experiments[i]]
        done_units = 0
        try:
            for (i, unit), done in zip(pairs, ctx.map_units(work, (unit for _, unit in pairs))):
                ran[i].result = done.result if ran[i].result is None else _plus(ran[i].result, done.result)
                reaches[i].append(done.reach)
                done_units += 1
                ctx.advance(unit.rows)
            first = len(experiments)
        except SamplerFault as fault:
            failed = pairs[done_units][0]
            ran[failed] = Ran(fault=fault)
            remember_hang(ctx, ids[failed], fault)
            first = failed + 1
            hang = earlier_hang(ctx)
            if hang is not None or stop_at_fault:
                for later in range(first, len(experiments)):
                    ran[later].not_run = hang or fault
                break
    for outcome, seen in zip(ran, reaches):
        outcome.reach = merge(seen)
    return ran


def _plus(total: Any, more: Any) -> Any:
    if isinstance(total, tuple):
        return tuple(a + b for a, b in zip(total, more))
    return total + more


def beyond_budget(ctx: Context, rid: str, family: str, case: str, shape: Shape) -> CheckResult:
    reason = (
        f"V={shape.vocab:,} is beyond the {ctx.budget.name} budget's shape_max_vocab ({ctx.budget.shape_max_vocab:,}); "
        "a larger budget tests it"
    )
    return CheckResult(id=rid, family=family, case=case, status="skip", message=reason)


def not_run(rid: str, family: str, case: str | None, fault: SamplerFault) -> CheckResult:
    """A shape not run because the sampler hung before: a skip naming the hang (the failure is the
    hang's own result), never a pass."""
    return CheckResult(
        id=rid,
        family=family,
        case=case,
        status="skip",
        message=f"not run: {fault.violation.rule}: {fault.violation.message}",
    )
