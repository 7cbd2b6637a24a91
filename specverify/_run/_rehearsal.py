"""A plan by rehearsal: the checks run against a stand-in that answers from the exact law, so the
plan counts the rows each check will draw, sized by the check's own code, before any is drawn.

Counting each decision at the budget's cap is an order of magnitude off below TV 0.01 (the cap is
rarely reached, several decisions share one experiment, a search draws per example).  So the
planned checks run here exactly as they will run, on the same cases and seeds, with two stand-ins:

* the run's **units** (every tally experiment, :mod:`specverify._calling.pool`) are answered with
  counts drawn from the exact law of a conforming sampler (a multinomial, seeded by the unit), so
  searches, sequential stops and confirmations take the path they take on a conforming sampler
  (a loop's tallied generations from the law its tally states, its few untallied ones drawn from
  its oracle's warp of the target);
* a **direct call** of the sampler (the contract's and the shapes' checks) is answered at once with
  a placeholder output; its rows and shape are what is counted.

Nothing calls the sampler while rehearsing.  What was drawn is grouped by shape, and each group is
then timed on the real sampler with a few of its own rows (:func:`time_groups`), units through the
same tally code a unit runs.  The result is what a conforming sampler costs: a failing one stops
sooner (with several workers a stop also leaves the units then running to finish, up to a unit a
worker, which are drawn but not counted here: 975M rows drawn for 967M planned at ``--tv 0.001``
over two workers), and a check that cannot be rehearsed (a tree's, any unit the stand-in cannot answer) is
counted at the cap as before, and said so.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

import numpy as np
import torch

from .._calling.pool import COUNTERS, UnitDone
from .._laws.exact import emitted_law, sequence_offsets, step_law, target_law
from .._record.reach import ReachRecorder
from .._warps.declared import declared_warp
from ..checks._base import Context
from ..checks._loop_context import LoopUnit, generate, tally_generations
from ..checks._shape_base import LumpedUnit, count_lumped, lumped_law
from ..checks._shape_target import accepted_law, tally_completed
from ..checks._tally import ModelTally, ModelUnit, StepUnit, count_adjacent, count_steps, tally_model
from ._plan import PlannedCheck

__all__ = ["Drawn", "Rehearsed", "rehearse", "time_groups"]

#: Rows a group is timed on: enough to amortise a call's fixed cost, few enough to be quick.
TIMING_ROWS = 16_384
#: Elements (rows x (K+1) x V) at most in a timing call of a direct-call group, and in a timed unit.
TIMING_ELEMENTS = 1 << 23
UNIT_TIMING_ELEMENTS = 1 << 26
#: Seconds the timing of groups may take; groups left untimed take the rate of the nearest timed one.
TIMING_SECONDS = 20.0


@dataclasses.dataclass
class Drawn:
    """Rows of one shape a check draws: in units (spread over the workers) or in direct calls (the
    first worker's), with an example to time them on."""

    where: str  # "units" or "calls"
    k: int
    vocab: int
    dtype: str
    rows: int
    example: Callable[..., int]  # the largest call's: (real sampler under test, rows, there) -> rows run
    largest: int  # rows of the largest call (or unit)
    calls: int = 1
    seconds_per_row: float | None = None
    seconds_per_call: float = 0.0  # a call's fixed cost, whatever its rows

    @property
    def key(self) -> tuple[str, int, int, str]:
        return (self.where, self.k, self.vocab, self.dtype)

    @property
    def elements(self) -> int:
        return (self.k + 1) * self.vocab


@dataclasses.dataclass
class Rehearsed:
    """One planned check's rehearsal: what it draws, grouped by shape; ``why_not`` if it could not
    be rehearsed (counted at the cap)."""

    id: str
    drawn: dict[tuple[str, int, int, str], Drawn]
    why_not: str | None = None

    @property
    def rows(self) -> int:
        return sum(d.rows for d in self.drawn.values())

    def seconds(self, workers: int) -> float | None:
        """Estimated seconds: direct calls on the first worker, units spread over ``workers``."""
        if any(d.seconds_per_row is None for d in self.drawn.values()):
            return None
        return sum(
            (d.rows * (d.seconds_per_row or 0.0) + d.calls * d.seconds_per_call)
            / (workers if d.where == "units" else 1)
            for d in self.drawn.values()
        )


def rehearse(
    planned: Iterable[PlannedCheck], sut: Any, budget: Any, seed: int, *, spec: str | None = None
) -> list[Rehearsed]:
    """Each planned check, run against the stand-ins (never the sampler); a generation loop's
    generations are drawn from its oracle's warped target."""
    out = []
    for item in planned:
        if item.skip_reason is not None:
            out.append(Rehearsed(item.id, {}))
            continue
        drawn: dict[tuple[str, int, int, str], Drawn] = {}
        # stand-ins for the pool and the sampler: they draw from the exact law instead of calling
        pool: Any = _ExactPool(drawn, oracle=declared_warp(sut))
        stand_in: Any = _StandIn(sut, drawn)
        ctx = Context(sut=stand_in, budget=budget, seed=seed, alpha=item.alpha, spec=spec, pool=pool)
        try:
            item.check.run(ctx)
            out.append(Rehearsed(item.id, drawn))
        except NotImplementedError as why:  # a unit the stand-in has no exact law for
            out.append(Rehearsed(item.id, drawn, str(why)))
        except Exception as exc:  # a check's path the placeholders cannot take: counted at the cap
            out.append(Rehearsed(item.id, drawn, f"its rehearsal stopped ({type(exc).__name__}: {exc})"))
    return out


def time_groups(rehearsed: list[Rehearsed], sut: Any, *, budget_s: float = TIMING_SECONDS, there: bool = False) -> str:
    """Time each shape group on the real sampler (largest first, one warm-up call, on its largest
    call's own inputs), less a call's fixed cost (timed on one row), and give groups left untimed
    (over ``budget_s``) the rate of the nearest timed one; returns how it was measured.

    ``there``: units are timed as several workers run them, tallied in the sampler's own process
    (the harness's work and the sampler's on one core); else as one worker does, tallied here while
    the sampler's process runs the calls (the two overlap, on two cores)."""
    groups: dict[tuple[str, int, int, str], list[Drawn]] = {}
    for r in rehearsed:
        for d in r.drawn.values():
            groups.setdefault(d.key, []).append(d)
    order = sorted(groups.values(), key=lambda ds: -sum(d.rows for d in ds))
    timed: dict[tuple[str, int, int, str], float] = {}
    failed: str | None = None
    per_call = {"units": 0.0, "calls": 0.0}
    fixed_costs: set[str] = set()
    start = time.perf_counter()
    for ds in order:
        if time.perf_counter() - start > budget_s and timed:
            break
        example = max(ds, key=lambda d: d.largest)
        most = UNIT_TIMING_ELEMENTS if example.where == "units" else TIMING_ELEMENTS
        cap = max(1, min(TIMING_ROWS, most // example.elements))
        try:
            example.example(sut, min(example.largest, cap), there)  # warm-up: a first call may compile or fill caches
            if example.where not in fixed_costs:  # a call's (a unit's) fixed cost, once each: one row
                began = time.perf_counter()
                example.example(sut, 1, there)
                per_call[example.where] = time.perf_counter() - began
                fixed_costs.add(example.where)
            began = time.perf_counter()
            ran = example.example(sut, min(example.largest, cap), there)
        except Exception as exc:  # a call the sampler refuses: this shape takes its neighbour's rate
            failed = failed or f"{type(exc).__name__}: {exc}"
            continue
        timed[example.key] = max(time.perf_counter() - began - per_call[example.where], 0.0) / max(ran, 1)
    if groups and not timed:
        raise RuntimeError(f"no shape could be timed ({failed})")
    for ds in order:  # a fixed cost the time budget left unmeasured: one row, once (never a 0 taken as measured)
        example = max(ds, key=lambda d: d.largest)
        if example.where in fixed_costs:
            continue
        try:
            example.example(sut, 1, there)  # warm-up
            began = time.perf_counter()
            example.example(sut, 1, there)
            per_call[example.where] = time.perf_counter() - began
            fixed_costs.add(example.where)
        except Exception:  # noqa: BLE001 - a call the sampler refuses: its fixed cost stays unknown
            continue
    for key, ds in groups.items():
        rate = timed.get(key)
        if rate is None:  # the nearest timed group of the same kind, by elements a row
            same = [k for k in timed if k[0] == key[0]] or list(timed)
            near = min(same, key=lambda k: abs(np.log((k[1] + 1) * k[2]) - np.log((key[1] + 1) * key[2])))
            rate = timed[near]
        for d in ds:
            d.seconds_per_row, d.seconds_per_call = rate, per_call[d.where]
    fixed = ", ".join(
        f"{_ms(per_call[where])} a {what}" if where in fixed_costs else f"no {what} timed"
        for where, what in (("calls", "call"), ("units", "unit"))
    )
    return (
        f"{len(timed)} of {len(groups)} shapes timed on the sampler ({fixed}, fixed), "
        "the rest at the nearest timed shape's rate"
    )


def _ms(seconds: float) -> str:
    """Milliseconds to one decimal, or two significant digits below 0.1 ms (never "0.0 ms" for a cost)."""
    ms = seconds * 1e3
    return f"{ms:.1f} ms" if ms >= 0.1 else f"{ms:.2g} ms"


class _StandIn:
    """The sampler under test as a check sees it, whose direct calls are answered at once with a
    placeholder (nothing emitted past the first position) and counted by shape."""

    def __init__(self, sut: Any, drawn: dict[tuple[str, int, int, str], Drawn]) -> None:
        self._sut = sut
        self._drawn = drawn
        self.reach = ReachRecorder()
        self.last_fault = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sut, name)

    def step(self, *inputs: Any, **options: Any) -> tuple[torch.Tensor, torch.Tensor]:
        first, drafts = inputs[0], inputs[2]
        rows, k = drafts.shape
        dtype = options.get("dtype") or getattr(self._sut, "dtype", first.dtype)
        _add(self._drawn, "calls", k, first.shape[-1], dtype, rows, _call_example(inputs, options, dtype))
        tokens = torch.full((rows, k + 1), -1, dtype=torch.int64)
        tokens[:, 0] = 0
        return tokens, torch.zeros(rows, dtype=torch.int64)

    chain_step = step

    def steps(self, batches: Iterable[tuple[Any, ...]], **options: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for batch in batches:
            yield self.step(*batch[:3], **options)


class _ExactPool:
    """Units answered from the exact law of a conforming sampler, counted by shape."""

    size = 1

    def __init__(self, drawn: dict[tuple[str, int, int, str], Drawn], oracle: Any = None) -> None:
        self._drawn = drawn
        self._oracle = oracle  # a loop's warp: its generations' law
        self._last: tuple[Any, Any] = (None, None)  # (an experiment's inputs, their law): one law an experiment

    def map(self, work: Callable[[Any, Any], Any], units: Iterable[Any]) -> Generator[UnitDone, None, None]:
        for unit in units:
            if isinstance(unit, StepUnit):
                result: Any = self._adjacent(unit) if work is count_adjacent else self._steps(unit)
            elif isinstance(unit, ModelUnit):
                result = self._model(unit)
            elif isinstance(unit, LoopUnit) and work is tally_generations:
                result = self._tallied(unit)
            elif isinstance(unit, LoopUnit) and self._oracle is not None:
                result = self._generations(unit)
            elif isinstance(unit, LumpedUnit) and work in (count_lumped, tally_completed):
                result = self._lumped(work, unit)
            else:
                raise NotImplementedError(f"no exact law for a {type(unit).__name__}")
            yield UnitDone(result, None, dict.fromkeys(COUNTERS, 0))

    def _law(self, unit: StepUnit) -> np.ndarray:
        """``[cases, cells]``: the law given the drafts of each of the unit's cases."""
        held, law = self._last
        if held is not unit.target:  # held, so never a freed tensor's id reused
            law = (
                step_law(unit.target.double(), unit.draft.double(), unit.drafts)
                .reshape(unit.target.shape[0], -1)
                .numpy()
            )
            law = law / law.sum(axis=1, keepdims=True)
            self._last = (unit.target, law)
        return law

    def _steps(self, unit: StepUnit) -> np.ndarray:
        law = self._law(unit)
        cases = law.shape[0]
        rows = (np.arange(unit.start, unit.stop) % cases).astype(np.int64)
        per_case = np.bincount(rows, minlength=cases)
        rng = np.random.default_rng(unit.seed)
        counts = np.stack([rng.multinomial(int(n), law[c]) for c, n in enumerate(per_case)])
        k, vocab = unit.drafts.shape[1], unit.target.shape[-1]
        _add(
            self._drawn,
            "units",
            k,
            vocab,
            unit.dtype,
            unit.stop - unit.start,
            _unit_example(count_steps, unit, lambda u, n: dataclasses.replace(u, stop=u.start + n)),
        )
        return counts.reshape(-1)

    def _adjacent(self, unit: StepUnit) -> np.ndarray:
        """Pairs of adjacent rows of one case, independent as a conforming sampler's are."""
        law = self._law(unit)[0]
        pairs = (unit.stop - unit.start) // 2
        _add(
            self._drawn,
            "units",
            unit.drafts.shape[1],
            unit.target.shape[-1],
            unit.dtype,
            unit.stop - unit.start,
            _unit_example(count_adjacent, unit, lambda u, n: dataclasses.replace(u, stop=u.start + n)),
        )
        return np.random.default_rng(unit.seed).multinomial(pairs, np.outer(law, law).reshape(-1))

    def _model(self, unit: ModelUnit) -> ModelTally:
        case = unit.case
        held, laws = self._last
        if held is not case:
            emitted = emitted_law(case.model, case.k).numpy()
            completed = target_law(case.model, case.k + 1).numpy()
            offsets = sequence_offsets(case.vocab_size, case.k)
            accepted = np.array([emitted[offsets[j] : offsets[j + 1]].sum() for j in range(case.k + 1)])
            laws = tuple(x / x.sum() for x in (emitted, completed, accepted))
            self._last = (case, laws)
        rng = np.random.default_rng(unit.sampler)
        tally = ModelTally(*(rng.multinomial(unit.rows, law) for law in laws))
        _add(
            self._drawn,
            "units",
            case.k,
            case.vocab_size,
            unit.dtype,
            unit.rows,
            _unit_example(tally_model, unit, lambda u, n: dataclasses.replace(u, rows=n)),
        )
        return tally

    def _lumped(self, work: Callable[[Any, Any], Any], unit: LumpedUnit) -> Any:
        """A production shape's counts: (accepted, cell of the last token) from the lumped law
        given the drafts, or each position's completed token and the accepted count."""
        case, rng = unit.case, np.random.default_rng(unit.seed)
        _add(
            self._drawn,
            "units",
            case.k,
            case.vocab_size,
            unit.dtype,
            unit.rows,
            _unit_example(work, unit, lambda u, n: dataclasses.replace(u, rows=n)),
        )
        if work is count_lumped:
            law = lumped_law(case, unit.cells, unit.n_cells)
            return rng.multinomial(unit.rows, law / law.sum())
        p = case.target_probs.double() / case.target_probs.double().sum(-1, keepdim=True)
        lumped = torch.zeros((case.k + 1, unit.n_cells), dtype=torch.float64).index_add_(1, unit.cells, p).numpy()
        completed = np.stack([rng.multinomial(unit.rows, row / row.sum()) for row in lumped])
        accepted = accepted_law(case)
        return completed, rng.multinomial(unit.rows, accepted / accepted.sum())

    def _tallied(self, unit: LoopUnit) -> np.ndarray:
        """A conforming loop's counts, drawn from the law its tally states (a multinomial a row
        group, or a position's pairs), generating nothing."""
        tally, rows = unit.tally, unit.prompt.shape[0]
        assert tally is not None
        rng = np.random.default_rng(unit.seed)
        law = tally.law / tally.law.sum(axis=1, keepdims=True)
        if tally.pairs:
            per_row = np.full(len(law), rows)
        else:
            per_row = np.bincount((tally.start + np.arange(rows)) % tally.groups, minlength=tally.groups)
        _add(
            self._drawn,
            "units",
            unit.num_tokens,
            unit.target.vocab_size,
            "loop",
            rows,
            _unit_example(tally_generations, unit, _fewer_rows),
        )
        return np.stack([rng.multinomial(int(n), row) for n, row in zip(per_row, law)])

    def _generations(self, unit: LoopUnit) -> torch.Tensor:
        """A conforming loop's generations: each token drawn from the oracle's warp of the target
        given the row's tokens so far (vectorised over rows; a short loop over positions)."""
        rng = torch.Generator().manual_seed(unit.seed)
        prefix, out = unit.prompt, []
        for _ in range(unit.num_tokens):
            probs = self._oracle(unit.target(prefix), unit.params)
            token = torch.multinomial(probs.double(), 1, generator=rng)
            out.append(token)
            prefix = torch.cat([prefix, token], dim=1)
        rows = unit.prompt.shape[0]
        _add(
            self._drawn,
            "units",
            unit.num_tokens,
            unit.target.vocab_size,
            "loop",
            rows,
            _unit_example(generate, unit, _fewer_rows),
        )
        return torch.cat(out, dim=1) if out else torch.empty((rows, 0), dtype=torch.int64)


def _fewer_rows(unit: LoopUnit, rows: int) -> LoopUnit:
    params = unit.params.select(slice(0, rows)) if unit.params.rows == unit.prompt.shape[0] else unit.params
    return dataclasses.replace(unit, prompt=unit.prompt[:rows], params=params)


def _add(
    drawn: dict[tuple[str, int, int, str], Drawn],
    where: str,
    k: int,
    vocab: int,
    dtype: Any,
    rows: int,
    example: Callable[[Any, int], int],
) -> None:
    name = str(dtype).removeprefix("torch.")
    key = (where, k, vocab, name)
    known = drawn.get(key)
    if known is None:
        drawn[key] = Drawn(where, k, vocab, name, rows, example, rows)
        return
    known.rows += rows
    known.calls += 1
    if rows > known.largest:
        known.example, known.largest = example, rows


def _unit_example(work: Callable[[Any, Any], Any], unit: Any, shrink: Callable[[Any, int], Any]) -> Callable[..., int]:
    """Run ``rows`` of this unit on a real sampler through the unit's own tally code (``there``:
    in the sampler's process, as a pool of several workers runs it)."""

    def run(sut: Any, rows: int, there: bool = False) -> int:
        if there and hasattr(sut, "unit"):
            sut.unit(work, shrink(unit, rows), there=True)
        else:
            work(sut, shrink(unit, rows))
        return rows

    return run


def _call_example(inputs: tuple[Any, ...], options: dict[str, Any], dtype: Any) -> Callable[..., int]:
    """Call a real sampler on the first ``rows`` rows of this call's own inputs (a direct call is
    made from here whatever the workers: ``there`` is ignored)."""
    kept = {name: value for name, value in options.items() if name in ("uniforms", "seeds")}

    def run(sut: Any, rows: int, there: bool = False) -> int:
        rows = min(rows, inputs[2].shape[0])
        parts = [x[:rows].clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        extra = {name: v[:rows].clone() if isinstance(v, torch.Tensor) else v for name, v in kept.items()}
        sut.step(*parts, generator=sut.generator(0), dtype=dtype, **extra)
        return rows

    return run
